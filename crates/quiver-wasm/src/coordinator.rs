//! The deployed coordinator, seen from the page: a query that `quiver.place` puts on
//! Lambda goes to its function URL (`quiver.function_url`) as a POST signed with the keys
//! typed into the page (SigV4 for the `lambda` service, as a URL with `AWS_IAM` auth wants;
//! unsigned without keys, for `NONE`). The answer comes back as Arrow, or, when too large
//! for a Lambda response, as a presigned URL under the result prefix that the page GETs.

use std::cell::RefCell;
use std::io::Cursor;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::error::{DataFusionError, Result};
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::HttpRequest;
use quiver_core::exec::place::Estimate;
use quiver_core::source::S3Credentials;
use quiver_core::{QueryOutput, QuiverSession};
use serde_json::{json, Value};

/// Runs `sql` here, or, with `quiver.function_url` set, wherever `quiver.place` puts it
/// (`QuiverSession::run_or_send`); an answer from the workers leaves the coordinator's
/// metrics in `lambda`.
pub async fn run_here_or_there(
    session: &QuiverSession,
    sql: &str,
    lambda: &RefCell<Option<Value>>,
) -> Result<QueryOutput> {
    let options = session.options_now();
    if options.function_url.trim().is_empty() {
        return session.run(sql).await;
    }
    let keys = session.runtime().sources.s3_credentials();
    let region = options.s3_region.filter(|r| !r.is_empty());
    let coordinator = FunctionUrl::new(options.function_url.trim(), region, keys);
    let send = || async {
        let answer = coordinator.query(sql).await?;
        *lambda.borrow_mut() = Some(answer.metrics);
        Ok(QueryOutput {
            schema: answer.schema,
            batches: answer.batches,
            metrics: session.runtime().metrics(),
        })
    };
    (session.run_or_send(sql, || coordinator.estimate(sql), send)).await
}

/// One coordinator's function URL, and how to sign for it.
pub struct FunctionUrl {
    /// The URL's base, without the trailing `/`.
    base: String,
    region: String,
    credentials: Option<S3Credentials>,
}

/// An answer from the workers, with the coordinator's metrics (its cost line, workers,
/// GB-seconds).
pub struct Answer {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub metrics: Value,
}

impl FunctionUrl {
    /// `url` as Terraform's `function_url` output gives it; the region is the one in its
    /// host (`….lambda-url.<region>.on.aws`), else `region`, else us-east-1.
    pub fn new(url: &str, region: Option<String>, credentials: Option<S3Credentials>) -> Self {
        let host = url.split("://").nth(1).unwrap_or("").split('/').next();
        let from_host = host.and_then(|h| h.split(".lambda-url.").nth(1)?.split('.').next());
        Self {
            base: url.trim_end_matches('/').to_string(),
            region: (from_host.map(str::to_string).or(region))
                .unwrap_or_else(|| "us-east-1".into()),
            credentials,
        }
    }

    /// What the coordinator's workers would take for `sql`: its `EXPLAIN COST`, by the
    /// deployment's own worker settings; `Err(why)` where it cannot plan `sql` (a `400`:
    /// a view made by an earlier query of this page, which its fresh session lacks).
    pub async fn estimate(&self, sql: &str) -> Result<std::result::Result<Estimate, String>> {
        let request = json!({"sql": format!("EXPLAIN COST {sql}"), "format": "json"});
        let body = match self.post(&request).await {
            Ok((_, body, _)) => body,
            Err(DataFusionError::Plan(why)) => return Ok(Err(why)),
            Err(e) => return Err(e),
        };
        let rows: Vec<Value> = serde_json::from_slice(&body).map_err(external)?;
        let number = |name: &str| rows.first().and_then(|row| row.get(name)?.as_f64());
        match (number("lambda_seconds"), number("lambda_dollars")) {
            (Some(seconds), Some(dollars)) => Ok(Ok(Estimate { seconds, dollars })),
            _ => Err(external(format!(
                "the coordinator gave no Lambda estimate: {}",
                String::from_utf8_lossy(&body)
            ))),
        }
    }

    /// Runs `sql` on the coordinator.
    pub async fn query(&self, sql: &str) -> Result<Answer> {
        let request = json!({"sql": sql, "format": "arrow", "redirect": false});
        let (content_type, mut body, mut metrics) = self.post(&request).await?;
        if content_type.starts_with("application/json") {
            // Too large for a response: written under the result prefix.
            let handed: Value = serde_json::from_slice(&body).map_err(external)?;
            let url = handed["result_url"].as_str().unwrap_or_default();
            metrics = handed["metrics"].clone();
            body = get(url).await?;
        }
        let reader = FileReader::try_new(Cursor::new(body), None)?;
        let schema = reader.schema();
        let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Answer {
            schema,
            batches,
            metrics,
        })
    }

    /// POSTs `request` to `/query`, signed when the page has keys; (content type, body,
    /// metrics) of a 200, or the coordinator's error.
    async fn post(&self, request: &Value) -> Result<(String, Vec<u8>, Value)> {
        let url = format!("{}/query", self.base);
        let body = request.to_string();
        let mut signed = HttpRequest::new(body.clone().into());
        *signed.method_mut() = http::Method::POST;
        *signed.uri_mut() = url.parse().map_err(external)?;
        (signed.headers_mut()).insert("content-type", "application/json".parse().unwrap());
        if let Some(keys) = &self.credentials {
            let credential = AwsCredential {
                key_id: keys.access_key_id.clone(),
                secret_key: keys.secret_access_key.clone(),
                token: keys.session_token.clone(),
            };
            AwsAuthorizer::new(&credential, "lambda", &self.region).authorize(&mut signed, None);
        }
        let mut post = reqwest::Client::new().post(&url).body(body);
        for (name, value) in signed.headers() {
            // The browser sets the host itself (to the same value, which was signed).
            if name != "host" {
                post = post.header(name.as_str(), value.as_bytes());
            }
        }
        let response = post.send().await.map_err(|e| {
            DataFusionError::Execution(format!(
                "could not reach the coordinator at {url}: {e} (is this page's origin in \
                 the function URL's CORS origins, cors_allow_origins in Terraform?)"
            ))
        })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            let value = response.headers().get(name)?;
            Some(value.to_str().ok()?.to_string())
        };
        let content_type = header("content-type").unwrap_or_default();
        let metrics = header("x-quiver-metrics")
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null);
        let body = response.bytes().await.map_err(external)?.to_vec();
        if status == 200 {
            return Ok((content_type, body, metrics));
        }
        Err(refused(status, &body))
    }
}

/// The bytes at a presigned URL (no headers: the signature is in the URL).
async fn get(url: &str) -> Result<Vec<u8>> {
    let response = reqwest::get(url).await.map_err(external)?;
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(external)?.to_vec();
    match status {
        200 => Ok(body),
        _ => Err(DataFusionError::Execution(format!(
            "the answer under the result prefix could not be read ({status}): {}",
            String::from_utf8_lossy(&body)
        ))),
    }
}

/// The coordinator's (or Lambda's, for a refused signature) error, said plainly: a plan
/// error for a `400` (the query, as the coordinator sees it), else an execution error.
fn refused(status: u16, body: &[u8]) -> DataFusionError {
    let said: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let message = ["error", "message", "Message"]
        .iter()
        .find_map(|key| said.get(key)?.as_str())
        .map_or_else(
            || String::from_utf8_lossy(body).into_owned(),
            str::to_string,
        );
    let hint = match status {
        403 => ": check the keys (they need lambda:InvokeFunctionUrl on the coordinator)",
        _ => "",
    };
    let message = message.trim().trim_end_matches('.');
    let what = format!("the coordinator answered {status}: {message}{hint}");
    match status {
        400 => DataFusionError::Plan(what),
        _ => DataFusionError::Execution(what),
    }
}

fn external(error: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(error.to_string())
}
