//! `quiver calibrate [URL]`: measures what the `auto` executor's estimates of a run here
//! rest on, instead of waiting for queries to show it. A whole file is read twice: the first
//! time through the network (the source's bandwidth and latency), the second from memory
//! (the decode rate per thread). Lambda workers are measured by the queries that run on
//! them (`quiver_lambda_executor::model`). Without a URL, it shows what is known.

use clap::Args;
use futures::StreamExt;
use quiver_core::rates::{
    MeasuredRates, ASSUMED_DECODE_BYTES_PER_THREAD_SECOND, ASSUMED_LATENCY_SECONDS,
    ASSUMED_NETWORK_BYTES_PER_SECOND,
};
use quiver_core::{describe, ExecutorKind, SessionOptions};

use crate::sessions::{apply_settings, keep_rates, new_session, RATES_FILE};

#[derive(Args)]
pub struct CalibrateArgs {
    /// A Parquet file (s3://, http(s):// or local) to read twice; a few hundred MB, so
    /// that bandwidth, not latency, shows.
    url: Option<String>,
    /// An S3-compatible endpoint, e.g. http://127.0.0.1:9000 (default: AWS_ENDPOINT_URL).
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// Any setting, as SET does (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
}

pub async fn run(args: CalibrateArgs, threads: usize) -> Result<(), String> {
    let session = new_session(SessionOptions {
        threads,
        executor: ExecutorKind::DataFusion,
    })?;
    // The first read must reach the network, the second must not.
    let mut settings = vec![
        "quiver.disk_cache_bytes=0".to_string(),
        "quiver.block_cache_bytes=2147483648".to_string(),
    ];
    settings.extend(args.s3_endpoint.map(|e| format!("quiver.s3_endpoint={e}")));
    settings.extend(args.settings);
    apply_settings(&session, &settings)?;
    keep_rates(&session);
    if let Some(url) = &args.url {
        let sql = format!("SELECT * FROM read_parquet('{}')", url.replace('\'', "''"));
        for pass in [
            "first (the source's bandwidth)",
            "again (decoding, from memory)",
        ] {
            eprintln!("calibrate: reading {url} {pass}");
            let answer = session
                .run_streaming(&sql)
                .await
                .map_err(|e| describe(&e))?;
            let mut batches = answer.batches;
            while let Some(batch) = batches.next().await {
                batch.map_err(|e| describe(&e))?;
            }
        }
    }
    print!("{}", report(&session.runtime().rates.now(), threads));
    Ok(())
}

/// What is known, a line each, and what is still assumed.
fn report(rates: &MeasuredRates, threads: usize) -> String {
    let mb = |bytes: f64| bytes / 1e6;
    let mut out = String::new();
    for (source, measured) in &rates.sources {
        out.push_str(&format!(
            "{source}: {:.1} MB/s ({} samples), first byte {:.0} ms\n",
            mb(measured
                .bytes_per_second
                .or(ASSUMED_NETWORK_BYTES_PER_SECOND)),
            measured.bytes_per_second.samples,
            measured.latency_seconds.or(ASSUMED_LATENCY_SECONDS) * 1e3,
        ));
    }
    if rates.sources.is_empty() {
        out.push_str(&format!(
            "no source measured yet: {:.0} MB/s and {:.0} ms assumed\n",
            mb(ASSUMED_NETWORK_BYTES_PER_SECOND),
            ASSUMED_LATENCY_SECONDS * 1e3
        ));
    }
    let decode = rates.decode_bytes_per_thread_second;
    out.push_str(&format!(
        "decode: {:.0} MB/s per thread x {threads} threads ({})\n",
        mb(decode.or(ASSUMED_DECODE_BYTES_PER_THREAD_SECOND)),
        match decode.samples {
            0 => "assumed".to_string(),
            n => samples(n),
        }
    ));
    for (function, measured) in &rates.workers {
        out.push_str(&format!(
            "lambda {function}: {:.1} MB/s a worker ({}), invoke {:.0} ms ({})\n",
            mb(measured.bytes_per_second.value),
            samples(measured.bytes_per_second.samples),
            measured.invoke_seconds.value * 1e3,
            samples(measured.invoke_seconds.samples),
        ));
    }
    out.push_str(&format!("kept in the cache folder's {RATES_FILE}\n"));
    out
}

fn samples(n: u64) -> String {
    format!("{n} sample{}", if n == 1 { "" } else { "s" })
}
