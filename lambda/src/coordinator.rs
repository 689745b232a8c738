//! The coordinator function: plans a query (footers stay cached while the function is
//! warm), fans its fragments out to workers through `LambdaRunner`, runs the final stage
//! and answers. One event shape per caller:
//! - direct invoke: `{"sql": "...", "format": "json" | "csv" | "arrow", "settings": {..}}`;
//! - a function URL: `POST /query` with that JSON as the body, `GET /health`; the
//!   answer's metrics ride in the `x-quiver-metrics` header;
//! - another coordinator (tree invocation): a `WorkerRequest` with `fan_out`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::error::{DataFusionError, Result};
use quiver_core::format::{write_batches, OutputFormat};
use quiver_core::runtime::QuiverRuntime;
use quiver_core::source::unique_id;
use quiver_core::{describe, ExecutorKind, QueryOutput, QuiverSession, SessionOptions};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use quiver_lambda_executor::executor::LambdaRunner;
use quiver_lambda_executor::options::LambdaOptions;
use quiver_lambda_executor::protocol::{
    encode_partitions, from_base64, to_base64, Output, WorkerRequest, WorkerResponse,
};
use quiver_lambda_executor::results::Results;
use quiver_lambda_executor::tree::SubResult;

/// Lambda's limit for a synchronous response (and a function URL's body), less room for
/// the envelope.
const RESPONSE_LIMIT: usize = 6 * 1000 * 1000 - 64 * 1024;

/// How long the URL of an answer handed over through S3 stays valid.
const ANSWER_URL_SECONDS: u64 = 3600;

#[derive(Debug, Deserialize)]
pub struct QueryRequest {
    pub sql: String,
    #[serde(default)]
    pub format: Option<String>,
    /// `quiver.*` or `lambda.*` settings for this query alone.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// A scheduled job's name, for the logs.
    #[serde(default)]
    pub job: Option<String>,
    /// Over a function URL, an answer too large for the response comes as a `303` to it;
    /// `false` asks for a `200` with its URL in the body instead (a page's script cannot
    /// read where a `303` points).
    #[serde(default = "yes")]
    pub redirect: bool,
}

fn yes() -> bool {
    true
}

/// A query's answer, encoded: in `body`, or, when too large for a response, at `url`.
pub struct Answer {
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub url: Option<String>,
    pub rows: u64,
    pub metrics: Value,
}

pub struct Coordinator {
    /// Caches shared by every query while the function is warm (footers, blocks).
    runtime: Arc<QuiverRuntime>,
    runner: Arc<LambdaRunner>,
    threads: usize,
    /// One query at a time, as Lambda runs one event at a time per instance.
    busy: Mutex<()>,
}

impl Coordinator {
    pub fn new(runner: Arc<LambdaRunner>, threads: usize) -> Result<Self> {
        Ok(Self {
            runtime: Arc::new(QuiverRuntime::default()),
            runner,
            threads,
            busy: Mutex::new(()),
        })
    }

    /// A fresh session over the shared caches: views and settings of one request never
    /// reach the next.
    fn session(&self, settings: &BTreeMap<String, String>) -> Result<QuiverSession> {
        let session = QuiverSession::with_runtime(
            SessionOptions {
                threads: self.threads,
                executor: ExecutorKind::Remote,
            },
            Arc::clone(&self.runtime),
        )?
        .with_fragment_runner(Arc::clone(&self.runner) as _);
        quiver_lambda_executor::register_options(&session);
        for (key, value) in settings {
            session.set(key, value)?;
        }
        crate::keep_on_disk(&session, "coordinator")?;
        Ok(session)
    }

    /// Runs `request.sql` with its settings.
    pub async fn query(&self, request: &QueryRequest) -> Result<Answer> {
        let format: OutputFormat = request
            .format
            .as_deref()
            .unwrap_or("json")
            .parse()
            .map_err(DataFusionError::Plan)?;
        if matches!(format, OutputFormat::Table | OutputFormat::Parquet) {
            return Err(DataFusionError::Plan(
                "format must be json, csv or arrow".into(),
            ));
        }
        let _busy = self.busy.lock().await;
        let started = Instant::now();
        if let Some(job) = &request.job {
            eprintln!("quiver: scheduled job '{job}' starts");
        }
        self.runner.take_metrics();
        let result = async {
            let session = self.session(&request.settings)?;
            let answered = self.answer(&session, &request.sql, format).await?;
            Ok::<_, DataFusionError>((session, answered))
        }
        .await;
        if let (Some(job), Err(e)) = (&request.job, &result) {
            eprintln!("quiver: scheduled job '{job}' failed: {}", describe(e));
        }
        let (session, (output, body, url)) = result?;
        let workers = self.runner.take_metrics();
        let mut spent = output.metrics.snapshot();
        spent.add(&workers.reads);
        let metrics = json!({
            "elapsed_ms": started.elapsed().as_secs_f64() * 1e3,
            "coordinator": output.metrics.snapshot(),
            "cost": session.cost_line(&spent, workers.cost()),
            "workers": workers,
        });
        if let Some(job) = &request.job {
            eprintln!("quiver: scheduled job '{job}' done: {metrics}");
        }
        Ok(Answer {
            content_type: match format {
                OutputFormat::Csv => "text/csv",
                OutputFormat::Arrow => "application/vnd.apache.arrow.file",
                _ => "application/json",
            },
            rows: output.batches.iter().map(|b| b.num_rows() as u64).sum(),
            body,
            url,
            metrics,
        })
    }

    /// Runs `sql` and encodes its answer; one larger than a response can hold is written
    /// under the result prefix and handed over as a presigned URL instead.
    async fn answer(
        &self,
        session: &QuiverSession,
        sql: &str,
        format: OutputFormat,
    ) -> Result<(QueryOutput, Vec<u8>, Option<String>)> {
        let output = session.run(sql).await?;
        let mut body = Vec::new();
        write_batches(format, &output.schema, &output.batches, &mut body)?;
        if body.len() <= RESPONSE_LIMIT {
            return Ok((output, body, None));
        }
        let config = session.context().state().config_options().clone();
        let prefix = LambdaOptions::of(&config).result_prefix.ok_or_else(|| {
            DataFusionError::Execution(format!(
                "the result is {} bytes, over the 6 MB a Lambda response holds, and no result \
                 prefix is set (QUIVER_RESULT_PREFIX) to hand it over through S3: add a \
                 LIMIT, or write it with COPY (SELECT ...) TO 's3://bucket/prefix/'",
                body.len()
            ))
        })?;
        let extension = match format {
            OutputFormat::Csv => "csv",
            OutputFormat::Arrow => "arrow",
            _ => "json",
        };
        let key = format!(
            "{}/answers/{}.{extension}",
            prefix.trim_end_matches('/'),
            unique_id()
        );
        let results = Results::new(&self.runtime);
        results.put(&key, body.into()).await?;
        let expires = Duration::from_secs(ANSWER_URL_SECONDS);
        let url = results.presigned_get(&key, expires).await?;
        Ok((output, Vec::new(), Some(url)))
    }

    /// A sub-coordinator's work: its workers' outputs, merged, as a worker would answer.
    pub async fn fan_out(&self, request: WorkerRequest) -> Result<WorkerResponse> {
        let shares = request.fan_out.clone().unwrap_or_default();
        let _busy = self.busy.lock().await;
        let session = self.session(&request.settings)?;
        session.begin_query()?;
        let context = session.context().task_ctx();
        self.runner.take_metrics();
        let (partitions, schema) = match self.runner.fan_out(&request, &shares, &context).await? {
            SubResult::Written(files) => {
                let mut metrics = self.runner.take_metrics();
                metrics.sub_coordinators += 1;
                return Ok(WorkerResponse {
                    output: Output::Written(files),
                    metrics,
                });
            }
            SubResult::Partitions(partitions, schema) => (partitions, schema),
        };
        let bytes = encode_partitions(&schema, &partitions)?;
        let output = Results::new(&self.runtime).deliver(&request, bytes).await?;
        let mut metrics = self.runner.take_metrics();
        metrics.sub_coordinators += 1;
        Ok(WorkerResponse { output, metrics })
    }

    /// Any event the function receives, to its response (or an error for direct invokes).
    pub async fn handle(&self, event: Value) -> Result<Value> {
        if let Some(http) = event.pointer("/requestContext/http") {
            let method = http.get("method").and_then(Value::as_str).unwrap_or("");
            let path = event
                .get("rawPath")
                .and_then(Value::as_str)
                .or_else(|| http.get("path").and_then(Value::as_str))
                .unwrap_or("/");
            return Ok(self.http(method, path, &event).await);
        }
        if event.get("fan_out").is_some_and(|f| !f.is_null()) {
            let request: WorkerRequest = serde_json::from_value(event)
                .map_err(|e| DataFusionError::Plan(format!("malformed fan-out request: {e}")))?;
            let response = self.fan_out(request).await?;
            return serde_json::to_value(response)
                .map_err(|e| DataFusionError::Internal(e.to_string()));
        }
        let request: QueryRequest = serde_json::from_value(event).map_err(|e| {
            DataFusionError::Plan(format!(
                "expected {{\"sql\": \"...\", \"format\": \"json\"}}: {e}"
            ))
        })?;
        let answer = self.query(&request).await?;
        if let Some(url) = answer.url {
            return Ok(json!({
                "content_type": answer.content_type,
                "rows": answer.rows,
                "result_url": url,
                "metrics": answer.metrics,
            }));
        }
        let body = match answer.content_type {
            "application/json" => serde_json::from_slice(&answer.body)
                .map_err(|e| DataFusionError::Internal(e.to_string()))?,
            "text/csv" => Value::String(String::from_utf8_lossy(&answer.body).into_owned()),
            _ => Value::String(to_base64(&answer.body)),
        };
        Ok(json!({
            "content_type": answer.content_type,
            "rows": answer.rows,
            "result": body,
            "metrics": answer.metrics,
        }))
    }

    /// A function URL request, to the response Lambda turns into HTTP.
    async fn http(&self, method: &str, path: &str, event: &Value) -> Value {
        match (method, path.trim_end_matches('/')) {
            ("GET", "/health") => respond(
                200,
                "application/json",
                json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}).to_string(),
                false,
            ),
            ("POST", "/query") => match query_request(event) {
                Ok(request) => answer_over_http(self.query(&request).await, request.redirect),
                Err(message) => http_error(400, message),
            },
            (_, "/query" | "/health") => {
                http_error(405, format!("{method} is not allowed on {path}"))
            }
            _ => http_error(
                404,
                format!("no such endpoint {path}: use POST /query or GET /health"),
            ),
        }
    }
}

/// The query a function URL's POST carries as its JSON body (base64 or not).
fn query_request(event: &Value) -> std::result::Result<QueryRequest, String> {
    let raw = event.get("body").and_then(Value::as_str).unwrap_or("");
    let body = if event.get("isBase64Encoded") == Some(&Value::Bool(true)) {
        let bytes = from_base64(raw).map_err(|e| e.to_string())?;
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        raw.to_string()
    };
    serde_json::from_str(&body).map_err(|e| {
        format!("expected a JSON body {{\"sql\": \"...\", \"format\": \"json\"}}: {e}")
    })
}

/// A query's answer as a function URL's response: the body, a `303` to S3 for an answer
/// too large for a response (or, without `redirect`, a `200` naming it), or the error.
fn answer_over_http(answer: Result<Answer>, redirect: bool) -> Value {
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => return http_error(status_of(&e), describe(&e)),
    };
    let mut response = match &answer.url {
        Some(url) => {
            let body = json!({"result_url": url, "rows": answer.rows,
                              "content_type": answer.content_type, "metrics": answer.metrics});
            let mut response = respond(200, "application/json", body.to_string(), false);
            if redirect {
                response["statusCode"] = json!(303);
                response["headers"]["location"] = json!(url);
            }
            response
        }
        None if answer.content_type.starts_with("application/vnd") => {
            respond(200, answer.content_type, to_base64(&answer.body), true)
        }
        None => respond(
            200,
            answer.content_type,
            String::from_utf8_lossy(&answer.body).into_owned(),
            false,
        ),
    };
    response["headers"]["x-quiver-metrics"] = json!(answer.metrics.to_string());
    response
}

/// The payload format 2.0 response, every field spelled out (cargo-lambda's emulator
/// requires `cookies` and `multiValueHeaders`).
fn respond(status: u16, content_type: &str, body: String, base64: bool) -> Value {
    json!({
        "statusCode": status,
        "headers": {"content-type": content_type},
        "multiValueHeaders": {},
        "cookies": [],
        "body": body,
        "isBase64Encoded": base64,
    })
}

fn http_error(status: u16, message: String) -> Value {
    respond(
        status,
        "application/json",
        json!({"error": message}).to_string(),
        false,
    )
}

/// 400 for what the caller can fix (SQL, plan, settings), 500 for the rest.
fn status_of(error: &DataFusionError) -> u16 {
    match error.find_root() {
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::Configuration(_)
        | DataFusionError::NotImplemented(_) => 400,
        _ => 500,
    }
}
