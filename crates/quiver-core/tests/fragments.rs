//! Fragments travel as bytes (what a Lambda worker receives) and give the answer the
//! whole plan gives.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use quiver_core::fragment::{decode, encode, fragments};
use quiver_core::{ExecutorKind, QuiverSession, SessionOptions};

/// 40,000 rows in 40 row groups: `k` cycles through 7 keys, `v` counts up.
fn write_file(dir: &std::path::Path) -> String {
    let path = dir.join("t.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1_000))
        .build();
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(properties)).unwrap();
    let keys: Vec<String> = (0..40_000).map(|i| format!("key{}", i % 7)).collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(keys)),
            Arc::new(Int64Array::from_iter_values(0..40_000)),
        ],
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    path.to_string_lossy().into_owned()
}

fn session(executor: ExecutorKind) -> QuiverSession {
    QuiverSession::new(SessionOptions {
        threads: 2,
        executor,
    })
    .unwrap()
}

const SETTINGS: &str = "SET quiver.min_bucket_bytes = 0;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fragments_survive_the_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path());
    let quiver = session(ExecutorKind::Fragments);
    let sql =
        format!("{SETTINGS} SELECT k, sum(v), count(*) FROM '{path}' WHERE v % 3 = 0 GROUP BY k");
    let plan = quiver.physical_plan(&sql).await.unwrap();
    let found = fragments(&plan);
    assert_eq!(found.len(), 1, "one scan, one fragment");
    let bytes = encode(&found[0]).unwrap();
    let decoded = decode(&bytes, &quiver.context().task_ctx()).unwrap();
    assert_eq!(
        encode(&decoded).unwrap(),
        bytes,
        "decode then encode gives the same bytes"
    );
    assert!(
        decoded.name() == "AggregateExec",
        "the partial aggregate runs in the fragment"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fragments_give_the_answer_of_the_whole_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path());
    let sql = format!(
        "{SETTINGS} SELECT k, sum(v) AS s, count(*) AS n, min(v) AS lo FROM '{path}' \
         WHERE v > 1234 GROUP BY k ORDER BY k"
    );
    let mut answers = vec![];
    for executor in [ExecutorKind::DataFusion, ExecutorKind::Fragments] {
        let output = session(executor).run(&sql).await.unwrap();
        assert!(
            output
                .metrics
                .buckets_total
                .load(std::sync::atomic::Ordering::Relaxed)
                >= 4
        );
        answers.push(pretty_format_batches(&output.batches).unwrap().to_string());
    }
    assert_eq!(answers[0], answers[1]);
    assert!(answers[0].contains("key0"), "{}", answers[0]);
}
