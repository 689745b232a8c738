//! S3 and S3-compatible stores, through object_store's `AmazonS3`: SigV4 signing, retries
//! with backoff (5xx, 503 SlowDown, resets, timeouts), paginated ListObjectsV2.
//!
//! Credentials follow the standard chain: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`
//! (and `AWS_SESSION_TOKEN`), then the shared profile files (`AWS_PROFILE`), then web
//! identity, container and instance roles (the last asked only on EC2: see below). `quiver.s3_anonymous` (or `AWS_SKIP_SIGNATURE`)
//! reads public buckets unsigned.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::RetryConfig;

use super::aws_profile::load_profile;
use super::remote::StoreSource;
use crate::error::{QuiverError, Result};

/// How to reach S3, beyond what the environment says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct S3Options {
    /// An S3-compatible server (`http://127.0.0.1:9000`); requests then use path style.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Unsigned requests, for public buckets.
    pub anonymous: bool,
    /// Force path-style (`true`) or virtual-hosted (`false`) addressing.
    pub path_style: Option<bool>,
}

/// Keys a program hands over (the web page's user types them): kept in memory, never in
/// settings, so `SHOW ALL` and plans never carry them; `Debug` prints no secret.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// 5 retries over at most 60 s: S3's advice for SlowDown is to back off and retry.
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

/// Instance roles come from the EC2 metadata service. Off EC2 nothing answers there, so it is
/// asked only on EC2 (or when `AWS_EC2_METADATA_DISABLED=false` says so), never when
/// `AWS_EC2_METADATA_DISABLED=true`.
fn instance_metadata_allowed(disabled: Option<String>) -> bool {
    match disabled.map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("true") => false,
        Some("false") => true,
        _ => on_ec2(),
    }
}

fn on_ec2() -> bool {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    read("/sys/devices/virtual/dmi/id/board_vendor").contains("Amazon EC2")
        || read("/sys/devices/virtual/dmi/id/sys_vendor").contains("Amazon EC2")
        || read("/sys/hypervisor/uuid").starts_with("ec2")
}

#[cfg(not(target_arch = "wasm32"))]
const NO_CREDENTIALS: &str = "no AWS credentials found: set AWS_ACCESS_KEY_ID and \
    AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or read a public bucket with --anonymous";
#[cfg(target_arch = "wasm32")]
const NO_CREDENTIALS: &str = "no AWS credentials: enter an access key and secret, use a \
    presigned https:// URL, or read a public bucket anonymously (quiver.s3_anonymous)";

pub fn s3_source(
    bucket: &str,
    options: &S3Options,
    credentials: Option<&S3Credentials>,
) -> Result<StoreSource> {
    // The browser has no environment (std::env::vars panics there).
    let builder = if cfg!(target_arch = "wasm32") {
        AmazonS3Builder::new()
    } else {
        AmazonS3Builder::from_env()
    };
    let mut builder = builder
        .with_bucket_name(bucket)
        .with_retry(super::retry::store_retries(retry()));
    if let Some(keys) = credentials.filter(|_| !options.anonymous) {
        builder = with_keys(
            builder,
            &keys.access_key_id,
            &keys.secret_access_key,
            &keys.session_token,
        );
    } else if env("AWS_ACCESS_KEY_ID").is_none() && !options.anonymous {
        builder = with_profile(builder, bucket)?;
    }
    if let Some(region) = &options.region {
        builder = builder.with_region(region);
    }
    let endpoint = (options.endpoint.clone())
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| env("AWS_ENDPOINT"));
    if let Some(endpoint) = &endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"));
        builder = builder.with_virtual_hosted_style_request(options.path_style == Some(false));
    } else if let Some(path_style) = options.path_style {
        builder = builder.with_virtual_hosted_style_request(!path_style);
    }
    if options.anonymous {
        builder = builder.with_skip_signature(true);
    }
    let store = builder
        .build()
        .map_err(|e| QuiverError::Invalid(format!("s3://{bucket}: cannot configure S3: {e}")))?;
    let store = Arc::new(store);
    let source = StoreSource::new(store.clone(), format!("s3://{bucket}/"), true);
    #[cfg(not(target_arch = "wasm32"))]
    let source = source.with_signer(store);
    Ok(source)
}

/// A variable of the environment, unset when empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn with_keys(
    builder: AmazonS3Builder,
    key: &str,
    secret: &str,
    token: &Option<String>,
) -> AmazonS3Builder {
    let builder = builder
        .with_access_key_id(key)
        .with_secret_access_key(secret);
    match token {
        Some(token) => builder.with_token(token),
        None => builder,
    }
}

/// The keys and region of the AWS profile (`AWS_PROFILE`, `~/.aws`), for a process with no
/// keys in its environment; an error naming what to set when neither a profile, a role
/// nor the instance's metadata can give credentials.
fn with_profile(mut builder: AmazonS3Builder, bucket: &str) -> Result<AmazonS3Builder> {
    let profile = load_profile();
    let has_keys = profile.access_key_id.is_some() && profile.secret_access_key.is_some();
    if let (Some(key), Some(secret)) = (&profile.access_key_id, &profile.secret_access_key) {
        builder = with_keys(builder, key, secret, &profile.session_token);
    }
    if let Some(region) = profile
        .region
        .filter(|_| env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none())
    {
        builder = builder.with_region(region);
    }
    let role_from_env = [
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .any(|name| env(name).is_some());
    if !has_keys && !role_from_env && !instance_metadata_allowed(env("AWS_EC2_METADATA_DISABLED")) {
        return Err(QuiverError::Denied {
            path: format!("s3://{bucket}"),
            reason: NO_CREDENTIALS.into(),
        });
    }
    Ok(builder)
}
