//! Calling functions through the Lambda Invoke API with the AWS SDK. The endpoint is
//! configurable (`QUIVER_LAMBDA_ENDPOINT`), so tests reach cargo-lambda's emulator with
//! the same code that reaches AWS.

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_lambda::primitives::Blob;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};

/// Why an invocation failed; all of them are worth a retry, since workers are idempotent.
#[derive(Debug)]
pub enum InvokeError {
    /// The function ran and failed: it returned an error, panicked, crashed or timed out.
    Function(String),
    /// The request did not get through (network, throttling after the SDK's own retries,
    /// our timeout).
    Call(String),
}

impl std::fmt::Display for InvokeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvokeError::Function(message) => write!(f, "the function failed: {message}"),
            InvokeError::Call(message) => write!(f, "the invocation failed: {message}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Invoker {
    client: aws_sdk_lambda::Client,
}

impl Invoker {
    /// A client for `endpoint` (or AWS's), with credentials and region from the standard
    /// chain, and `timeout` for one invocation (a worker's own timeout, plus margin).
    pub async fn new(endpoint: Option<&str>, timeout: Duration) -> Self {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .operation_attempt_timeout(timeout)
                    .build(),
            );
        if let Some(endpoint) = endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let config = loader.load().await;
        let mut builder = aws_sdk_lambda::config::Builder::from(&config);
        if config.region().is_none() {
            builder = builder.region(Region::new("us-east-1"));
        }
        Self {
            client: aws_sdk_lambda::Client::from_conf(builder.build()),
        }
    }

    /// Invokes `function` synchronously with `payload`; its response payload on success.
    pub async fn invoke(&self, function: &str, payload: Vec<u8>) -> Result<Vec<u8>, InvokeError> {
        let output = self
            .client
            .invoke()
            .function_name(function)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| {
                InvokeError::Call(aws_sdk_lambda::error::DisplayErrorContext(e).to_string())
            })?;
        let payload = output
            .payload()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        match output.function_error() {
            Some(kind) => Err(InvokeError::Function(error_message(kind, &payload))),
            // cargo-lambda's emulator does not set X-Amz-Function-Error: an error payload
            // is recognised by its shape.
            None if is_error_payload(&payload) => {
                Err(InvokeError::Function(error_message("Unhandled", &payload)))
            }
            None => Ok(payload),
        }
    }
}

fn is_error_payload(payload: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(payload).is_ok_and(
        |object| {
            object.contains_key("errorMessage")
                && object
                    .keys()
                    .all(|k| matches!(k.as_str(), "errorMessage" | "errorType" | "stackTrace"))
        },
    )
}

/// The error a failed function reported: `{"errorType": ..., "errorMessage": ...}`.
fn error_message(kind: &str, payload: &[u8]) -> String {
    let parsed: serde_json::Value = serde_json::from_slice(payload).unwrap_or_default();
    match parsed.get("errorMessage").and_then(|m| m.as_str()) {
        Some(message) => format!("{message} ({kind})"),
        None => format!("{} ({kind})", String::from_utf8_lossy(payload).trim()),
    }
}
