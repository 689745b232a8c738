//! Fragments travel as bytes (what a Lambda worker receives) and give the answer the
//! whole plan gives.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::collect;
use datafusion::physical_plan::displayable;
use datafusion::physical_plan::filter::FilterExec;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use quiver_core::exec::{
    execute_with_fragments, run_partitions, with_build_sides, FragmentRunner, RayonRunner,
};
use quiver_core::fragment::{
    decode, encode, fragments, hash_parts, over_buckets, over_parts, split_side, ExchangeStage,
    Fragment,
};
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
    let sql = format!(
        "{SETTINGS} SELECT k, sum(v), count(*) FROM '{path}' \
         WHERE v % 3 = 0 AND k <> 'key1' GROUP BY k"
    );
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
    // The filter's conjuncts, evaluated in turn (`InTurn`), travel as they are.
    let filter = decoded.children()[0];
    let filter = filter.downcast_ref::<FilterExec>().unwrap();
    assert!(format!("{:?}", filter.predicate()).starts_with("InTurn"));
    assert_eq!(
        filter.predicate().to_string(),
        "v@1 % 3 = 0 AND k@0 != key1"
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

/// 5 of `t`'s 7 keys, each with a label.
fn write_labels(dir: &std::path::Path) -> String {
    let path = dir.join("labels.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("label", DataType::Utf8, false),
    ]));
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema.clone(), None).unwrap();
    let keys: Vec<String> = (0..5).map(|i| format!("key{i}")).collect();
    let labels: Vec<String> = (0..5).map(|i| format!("label{}", i % 3)).collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(keys)),
            Arc::new(StringArray::from(labels)),
        ],
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    path.to_string_lossy().into_owned()
}

/// Every join type gives the whole plan's answer when fragments run it, whether its build
/// side travels or stays on the coordinator (`quiver.broadcast_bytes = 0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_give_the_answer_of_the_whole_plan() {
    let dir = tempfile::tempdir().unwrap();
    let (t, labels) = (write_file(dir.path()), write_labels(dir.path()));
    let views = format!(
        "{SETTINGS} CREATE VIEW t AS SELECT * FROM '{t}'; \
         CREATE VIEW labels AS SELECT * FROM '{labels}';"
    );
    let queries = [
        "SELECT label, sum(v), count(*) FROM t JOIN labels ON k = key WHERE v > 100 \
         GROUP BY label ORDER BY label",
        "SELECT label, count(v) FROM labels LEFT JOIN t ON k = key AND v < 10 \
         GROUP BY label ORDER BY label",
        "SELECT k, count(label) FROM t LEFT JOIN labels ON k = key GROUP BY k ORDER BY k",
        "SELECT k, count(*) FROM t WHERE k IN (SELECT key FROM labels WHERE label <> 'label1') \
         GROUP BY k ORDER BY k",
        "SELECT k, count(*) FROM t WHERE NOT EXISTS (SELECT 1 FROM labels WHERE key = k) \
         GROUP BY k ORDER BY k",
        "SELECT count(*) FROM t a JOIN labels ON a.k = key JOIN t b ON b.v = a.v + 1",
    ];
    for sql in queries {
        let whole = session(ExecutorKind::DataFusion);
        whole.run(&views).await.unwrap();
        let expected = pretty_format_batches(&whole.run(sql).await.unwrap().batches)
            .unwrap()
            .to_string();
        for limit in ["16777216", "0"] {
            let fragmented = session(ExecutorKind::Fragments);
            fragmented.run(&views).await.unwrap();
            fragmented
                .run(&format!("SET quiver.broadcast_bytes = {limit}"))
                .await
                .unwrap();
            let output = fragmented.run(sql).await.unwrap();
            let answer = pretty_format_batches(&output.batches).unwrap().to_string();
            assert_eq!(answer, expected, "{sql} with broadcast_bytes {limit}");
        }
    }
}

/// A small build side travels with the probe side's fragment, so the join and the partial
/// aggregate above it run where the probe side is read; at 0 bytes the join stays here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_build_side_travels_with_the_probe_side() {
    let dir = tempfile::tempdir().unwrap();
    let (t, labels) = (write_file(dir.path()), write_labels(dir.path()));
    let sql = format!(
        "{SETTINGS} SELECT label, sum(v) FROM '{t}' JOIN '{labels}' ON k = key GROUP BY label"
    );
    for (limit, joined_on_workers) in [("16777216", true), ("0", false)] {
        let quiver = session(ExecutorKind::Fragments);
        quiver
            .run(&format!("SET quiver.broadcast_bytes = {limit}"))
            .await
            .unwrap();
        let plan = quiver.physical_plan(&sql).await.unwrap();
        let context = quiver.context().task_ctx();
        let runner = RayonRunner(quiver.pool());
        let plan = with_build_sides(plan, &context, &runner).await.unwrap();
        let found = fragments(&plan);
        assert_eq!(found.len(), 1, "only t's scan is left to read");
        let shown = displayable(found[0].as_ref()).indent(false).to_string();
        assert_eq!(shown.contains("HashJoinExec"), joined_on_workers, "{shown}");
        if joined_on_workers {
            assert_eq!(found[0].name(), "AggregateExec", "{shown}");
            let bytes = encode(&found[0]).unwrap();
            decode(&bytes, &context).expect("the build side travels in the fragment");
        }
    }
}

/// A TopK (a sort with a fetch, per partition) travels with its scan: a worker keeps k rows
/// per bucket, not every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_k_travels_with_its_scan() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path());
    let quiver = session(ExecutorKind::Fragments);
    let sql = format!("{SETTINGS} SELECT k, v FROM '{path}' ORDER BY v DESC LIMIT 3");
    let plan = quiver.physical_plan(&sql).await.unwrap();
    let found = fragments(&plan);
    let shown = displayable(plan.as_ref()).indent(false).to_string();
    assert_eq!(found.len(), 1, "{shown}");
    assert_eq!(found[0].name(), "SortExec(TopK)", "{shown}");
    let bytes = encode(&found[0]).unwrap();
    decode(&bytes, &quiver.context().task_ctx()).unwrap();
}

/// Runs fragments on rayon, and exchanges in-process the way Lambda's two waves do: each
/// side's template decoded, run over its buckets and hashed into parts; then each join
/// partition's stage template decoded and run over its parts of both sides.
struct InProcessExchange<'a> {
    rayon: RayonRunner<'a>,
    parts: usize,
    stages: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl FragmentRunner for InProcessExchange<'_> {
    async fn run(
        &self,
        fragment: &Fragment,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        self.rayon.run(fragment, context).await
    }

    fn exchanges(&self, _config: &ConfigOptions) -> bool {
        true
    }

    async fn exchange(
        &self,
        stage: &ExchangeStage,
        context: &Arc<TaskContext>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        self.stages
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut hashed = vec![];
        for side in &stage.sides {
            let (template, hashing) = split_side(&decode(&side.template(self.parts)?, context)?)?;
            let scan = side.fragment.scan();
            let plan = over_buckets(&template, scan.files().to_vec(), side.fragment.buckets())?;
            let output = run_partitions(&plan, context, self.rayon.0).await?;
            hashed.push(hash_parts(
                output.into_iter().flatten().collect(),
                &hashing,
            )?);
        }
        let template = decode(&stage.template()?, context)?;
        let mut outputs = vec![];
        let [build, probe] = [&hashed[0], &hashed[1]];
        for (build, probe) in build.iter().zip(probe) {
            let plan = over_parts(&template, build.clone(), probe.clone())?;
            outputs.push(collect(plan, Arc::clone(context)).await?);
        }
        Ok(outputs)
    }
}

/// Joins of two scans run as exchange stages when their build side is over
/// `quiver.broadcast_bytes` (0 here), whether DataFusion planned them partitioned (told to
/// collect no build side) or collecting the build side, and every join type gives the
/// whole plan's answer: equal keys meet in the same part on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_through_an_exchange_give_the_answer_of_the_whole_plan() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_file(dir.path());
    let views =
        format!("{SETTINGS} SET quiver.broadcast_bytes = 0; CREATE VIEW t AS SELECT * FROM '{t}';");
    let partitioned = "SET datafusion.optimizer.hash_join_single_partition_threshold = 0; \
         SET datafusion.optimizer.hash_join_single_partition_threshold_rows = 0;";
    let queries = [
        "SELECT a.k, count(*), sum(b.v) FROM t a JOIN t b ON a.v = b.v + 3 \
         GROUP BY a.k ORDER BY a.k",
        "SELECT a.k, count(b.v) FROM t a LEFT JOIN t b ON a.v = b.v * 2 GROUP BY a.k ORDER BY 1",
        "SELECT count(a.v), count(b.v), count(*) FROM t a FULL JOIN t b ON a.v = b.v + 20000",
        "SELECT k, count(*) FROM t WHERE v IN (SELECT v * 3 FROM t WHERE k <> 'key1') \
         GROUP BY k ORDER BY k",
        "SELECT k, count(*) FROM t WHERE NOT EXISTS (SELECT 1 FROM t b WHERE b.v = t.v * 2) \
         GROUP BY k ORDER BY k",
        "SELECT count(*), sum(a.v) FROM t a JOIN t b ON a.k = b.k AND a.v = b.v - 7",
    ];
    for (sql, setup) in queries.iter().flat_map(|sql| {
        [
            (sql, views.clone()),
            (sql, format!("{views} {partitioned}")),
        ]
    }) {
        let whole = session(ExecutorKind::DataFusion);
        whole.run(&setup).await.unwrap();
        let expected = pretty_format_batches(&whole.run(sql).await.unwrap().batches)
            .unwrap()
            .to_string();
        let quiver = session(ExecutorKind::Fragments);
        quiver.run(&setup).await.unwrap();
        let runner = InProcessExchange {
            rayon: RayonRunner(quiver.pool()),
            parts: 3,
            stages: Default::default(),
        };
        let plan = quiver.physical_plan(sql).await.unwrap();
        let shown = displayable(plan.as_ref()).indent(false).to_string();
        let mode = match setup.contains("threshold") {
            true => "mode=Partitioned",
            false => "mode=CollectLeft",
        };
        assert!(shown.contains(mode), "{sql}: {shown}");
        let batches = execute_with_fragments(plan, quiver.context().task_ctx(), &runner)
            .await
            .unwrap();
        let answer = pretty_format_batches(&batches).unwrap().to_string();
        assert_eq!(answer, expected, "{sql}");
        let stages = runner.stages.load(std::sync::atomic::Ordering::Relaxed);
        assert!(stages >= 1, "{sql}: no exchange stage ran");
    }
}
