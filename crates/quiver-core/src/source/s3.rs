//! S3 and S3-compatible stores, through object_store's `AmazonS3`: SigV4 signing, retries
//! with backoff (5xx, 503 SlowDown, resets, timeouts), paginated ListObjectsV2.
//!
//! Credentials follow the standard chain: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`
//! (and `AWS_SESSION_TOKEN`), then the shared profile files (`AWS_PROFILE`), then web
//! identity, container and instance roles. `quiver.s3_anonymous` (or `AWS_SKIP_SIGNATURE`)
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

/// 5 retries over at most 60 s: S3's advice for SlowDown is to back off and retry.
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

pub fn s3_source(bucket: &str, options: &S3Options) -> Result<StoreSource> {
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(retry());
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if env("AWS_ACCESS_KEY_ID").is_none() && !options.anonymous {
        let profile = load_profile();
        if let (Some(key), Some(secret)) = (profile.access_key_id, profile.secret_access_key) {
            builder = builder
                .with_access_key_id(key)
                .with_secret_access_key(secret);
            if let Some(token) = profile.session_token {
                builder = builder.with_token(token);
            }
        }
        if let Some(region) = profile
            .region
            .filter(|_| env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none())
        {
            builder = builder.with_region(region);
        }
        if env("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            // No instance metadata: point its client at a closed local port so that a
            // missing credential fails at once instead of waiting on the network.
            builder = builder.with_metadata_endpoint("http://127.0.0.1:9");
        }
    }
    if let Some(region) = &options.region {
        builder = builder.with_region(region);
    }
    let endpoint = options
        .endpoint
        .clone()
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
    Ok(StoreSource::new(
        Arc::new(store),
        format!("s3://{bucket}/"),
        true,
    ))
}
