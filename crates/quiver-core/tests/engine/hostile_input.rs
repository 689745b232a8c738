//! Hostile input, fuzzed with a fixed budget: mutated footers and data pages, globs, paths
//! and URLs, range lists and fragment bytes must give an answer or an error, never a panic,
//! a hang or an allocation of what a corrupt file declares (which would abort the process).
//! The generator is seeded, so a failure reproduces; inputs that once failed stay as cases
//! of their own (`tests/hostile/`, and cases in the modules they broke).
//! `QUIVER_FUZZ_ITERATIONS=N` multiplies the budget for a longer run, and
//! `QUIVER_FUZZ_KEEP=DIR` saves the inputs whose error is a contained panic:
//! `QUIVER_FUZZ_ITERATIONS=100 cargo test -p quiver-core --test engine hostile_input`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::Int32Type;
use futures::FutureExt;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{
    ColumnChunkMetaDataBuilder, ParquetMetaDataReader, ParquetMetaDataWriter,
    RowGroupMetaDataBuilder,
};
use parquet::file::properties::WriterProperties;

use quiver_core::source::{hive, GlobPattern, S3Options, Sources};
use quiver_core::{coalesce, FetchOptions};
use quiver_core::{ExecutorKind, QuiverSession, SessionOptions};

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The budget: `base` iterations times `QUIVER_FUZZ_ITERATIONS` (1 by default).
fn budget(base: usize) -> usize {
    let factor = std::env::var("QUIVER_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize);
    base * factor.max(1)
}

/// Values that break arithmetic: signs, widths, boundaries.
const BYTES: &[u8] = &[0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x15, 0x19, 0x1C, 0x2C];

/// One to four mutations: bit flips, boundary bytes, huge varints, cuts, repeats.
fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut bytes = input.to_vec();
    for _ in 0..=rng.below(4) {
        if bytes.is_empty() {
            bytes.push(*rng.pick(BYTES));
            continue;
        }
        let at = rng.below(bytes.len());
        match rng.below(6) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = *rng.pick(BYTES),
            2 => {
                // a varint as large as thrift allows: absurd lengths and counts
                let huge = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
                let end = (at + rng.below(huge.len()) + 1).min(bytes.len());
                bytes[at..end].copy_from_slice(&huge[..end - at]);
            }
            3 => bytes.truncate(at),
            4 => {
                let end = (at + rng.below(64) + 1).min(bytes.len());
                let repeated = bytes[at..end].to_vec();
                bytes.splice(at..at, repeated);
            }
            _ => {
                let end = (at + rng.below(64) + 1).min(bytes.len());
                bytes.drain(at..end);
            }
        }
    }
    bytes
}

/// A small file with what footers describe: several row groups, statistics, dictionary
/// and plain pages, nulls, a nested column, zstd pages.
fn sample_file() -> Vec<u8> {
    let rows: i32 = 600;
    let tags = ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..rows).map(|i| (i % 5 != 0).then(|| (0..i % 4).map(Some).collect::<Vec<_>>())),
    );
    let batch = RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(0..rows as i64)) as ArrayRef,
        ),
        (
            "name",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("name-{}", i % 7)),
            )) as ArrayRef,
        ),
        (
            "price",
            Arc::new(Float64Array::from_iter(
                (0..rows).map(|i| (i % 3 != 0).then_some(i as f64 * 1.5)),
            )) as ArrayRef,
        ),
        ("tags", Arc::new(tags) as ArrayRef),
        (
            "day",
            Arc::new(Date32Array::from_iter_values((0..rows).map(|i| 19_000 + i))) as ArrayRef,
        ),
    ])
    .unwrap();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(200))
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut file = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    file
}

/// (the data before the footer, the footer) of a Parquet file.
fn split(file: &[u8]) -> (&[u8], &[u8]) {
    let len = u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().unwrap());
    let footer_start = file.len() - 8 - len as usize;
    (&file[..footer_start], &file[footer_start..file.len() - 8])
}

fn join(data: &[u8], footer: &[u8]) -> Vec<u8> {
    let mut file = data.to_vec();
    file.extend_from_slice(footer);
    file.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    file.extend_from_slice(b"PAR1");
    file
}

/// Runs each file through the queries that read footers, statistics and pages; a panic is
/// a failure that names the input.
async fn survive(files: Vec<Vec<u8>>, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let session = session(ExecutorKind::DataFusion);
    for (i, file) in files.into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.parquet"));
        std::fs::write(&path, &file).unwrap();
        let path = path.display().to_string();
        for sql in [
            format!("SELECT * FROM '{path}'"),
            format!("SELECT count(*), min(id), max(day) FROM '{path}'"),
            format!("SELECT * FROM parquet_metadata('{path}')"),
        ] {
            // DataFusion resumes its tasks' panics in the caller, so one is caught here.
            let run = AssertUnwindSafe(session.run(&sql)).catch_unwind().await;
            match run {
                Err(_) => panic!(
                    "{what} {i} panicked the engine on {sql}; the file, hex: {}",
                    hex(&file)
                ),
                Ok(Err(error)) => keep_if_contained(&error.to_string(), what, i, &file),
                Ok(Ok(_)) => {}
            }
        }
    }
}

/// What the errors of panics that Quiver contains say (`error::contain_panic`).
const CONTAINED: &[&str] = &[
    "corrupt Parquet data: a decoder failed (",
    "ARROW:schema metadata is malformed (",
    "malformed fragment: ",
];

/// With `QUIVER_FUZZ_KEEP=DIR`, an input whose error is a contained panic is saved there,
/// to be added to `tests/hostile/` (run by `kept_inputs_give_errors_not_panics`).
fn keep_if_contained(error: &str, what: &str, i: usize, input: &[u8]) {
    let Ok(dir) = std::env::var("QUIVER_FUZZ_KEEP") else {
        return;
    };
    if CONTAINED.iter().any(|mark| error.contains(mark)) {
        let name = format!("{}-{i}", what.replace(' ', "-"));
        let extension = if what.contains("fragment") {
            "bin"
        } else {
            "parquet"
        };
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(format!("{dir}/{name}.{extension}"), input).unwrap();
    }
}

/// Inputs that once panicked Quiver (found by the tests above with a larger budget),
/// kept: each must still give an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_inputs_give_errors_not_panics() {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile");
    let mut files: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no kept inputs in {folder}");
    let session = session(ExecutorKind::DataFusion);
    let context = session.context().task_ctx();
    for path in files {
        let errors: Vec<String> = if path.extension().is_some_and(|e| e == "bin") {
            let bytes = std::fs::read(&path).unwrap();
            let decoded = catch_unwind(AssertUnwindSafe(|| {
                quiver_core::fragment::decode(&bytes, &context)
            }));
            vec![decoded
                .expect("decoding panicked")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()]
        } else {
            let mut errors = Vec::new();
            for sql in ["SELECT * FROM '{}'", "SELECT * FROM parquet_metadata('{}')"] {
                let sql = sql.replace("{}", &path.display().to_string());
                let run = AssertUnwindSafe(session.run(&sql)).catch_unwind().await;
                errors.push(match run.expect("the engine panicked") {
                    Ok(_) => String::new(),
                    Err(error) => error.to_string(),
                });
            }
            errors
        };
        assert!(
            errors
                .iter()
                .any(|e| CONTAINED.iter().any(|mark| e.contains(mark))),
            "{}: {errors:?}",
            path.display()
        );
    }
}

/// A session on 2 threads with `executor`.
fn session(executor: ExecutorKind) -> QuiverSession {
    QuiverSession::new(SessionOptions {
        threads: 2,
        executor,
    })
    .unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_footers_give_errors_not_panics() {
    let file = sample_file();
    let (data, footer) = split(&file);
    let mut rng = Rng(0x5EED_F007);
    let files = (0..budget(300))
        .map(|_| join(data, &mutate(&mut rng, footer)))
        .collect();
    survive(files, "mutated footer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_pages_give_errors_not_panics() {
    let file = sample_file();
    let (data, footer) = split(&file);
    let mut rng = Rng(0xDA7A_9A6E);
    let files = (0..budget(150))
        .map(|_| {
            // Mutate in place, so that the footer's offsets still point into the pages.
            let mut pages = mutate(&mut rng, data);
            pages.resize(data.len(), 0);
            join(&pages, footer)
        })
        .collect();
    survive(files, "mutated pages").await;
}

/// The sample file with row group 1's first chunk (and the row group) rewritten by `lie`.
fn lying_file(
    lie: impl Fn(ColumnChunkMetaDataBuilder, RowGroupMetaDataBuilder) -> LyingGroup,
) -> Vec<u8> {
    let file = sample_file();
    let (data, footer) = split(&file);
    let metadata =
        ParquetMetaDataReader::decode_metadata(&bytes::Bytes::copy_from_slice(footer)).unwrap();
    let mut builder = metadata.into_builder();
    let mut row_groups = builder.take_row_groups();
    let group = row_groups[1].clone();
    let (column, group) = lie(group.column(0).clone().into_builder(), group.into_builder());
    let mut columns = row_groups[1].columns().to_vec();
    columns[0] = column.build().unwrap();
    row_groups[1] = group.set_column_metadata(columns).build().unwrap();
    let metadata = builder.set_row_groups(row_groups).build();
    let mut lying = data.to_vec();
    ParquetMetaDataWriter::new(&mut lying, &metadata)
        .finish()
        .unwrap();
    lying
}

type LyingGroup = (ColumnChunkMetaDataBuilder, RowGroupMetaDataBuilder);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_footer_declaring_absurd_sizes_is_refused_before_reading_them() {
    let lies: Vec<(&str, Vec<u8>)> = vec![
        (
            "outside the file's",
            lying_file(|c, g| (c.set_total_compressed_size(1 << 40), g)),
        ),
        (
            "outside the file's",
            lying_file(|c, g| (c.set_total_compressed_size(-5), g)),
        ),
        (
            "outside the file's",
            lying_file(|c, g| {
                (
                    c.set_data_page_offset(-1).set_dictionary_page_offset(None),
                    g,
                )
            }),
        ),
        (
            "outside the file's",
            lying_file(|c, g| (c.set_dictionary_page_offset(Some(i64::MAX)), g)),
        ),
        (
            "declares -1 rows",
            lying_file(|c, g| (c, g.set_num_rows(-1))),
        ),
        // The count DataFusion answers from and the rows the decoder makes would differ.
        (
            "row group 1 declares 0 rows but its column \"id\" holds 200 values",
            lying_file(|c, g| (c, g.set_num_rows(0))),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let session = session(ExecutorKind::DataFusion);
    for (i, (expected, file)) in lies.iter().enumerate() {
        let path = dir.path().join(format!("lie{i}.parquet"));
        std::fs::write(&path, file).unwrap();
        for sql in [
            "SELECT * FROM '{}'",
            "SELECT count(*) FROM parquet_metadata('{}')",
        ] {
            let sql = sql.replace("{}", &path.display().to_string());
            let error = match session.run(&sql).await {
                Ok(_) => panic!("lie {i} was believed: {sql}"),
                Err(error) => error.to_string(),
            };
            assert!(
                error.contains(expected) && error.contains(&format!("lie{i}.parquet")),
                "lie {i}: {error}"
            );
        }
    }
}

/// Arrow's reading of a file's `ARROW:schema` hint asserts on some malformed schemas; found
/// by mutating the hint, such a file must be refused with an error naming the file (and no
/// panic printed), in the query and in `parquet_metadata`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_arrow_schema_hint_is_refused_not_a_panic() {
    use base64::Engine;
    use parquet::arrow::parquet_to_arrow_schema;
    use parquet::file::metadata::{FileMetaData, KeyValue, ParquetMetaDataBuilder};

    let file = sample_file();
    let (data, footer) = split(&file);
    let metadata =
        ParquetMetaDataReader::decode_metadata(&bytes::Bytes::copy_from_slice(footer)).unwrap();
    let meta = metadata.file_metadata();
    let hint = (meta.key_value_metadata().unwrap().iter())
        .find(|kv| kv.key == "ARROW:schema")
        .and_then(|kv| kv.value.clone())
        .unwrap();
    let engine = base64::engine::general_purpose::STANDARD;
    let ipc = engine.decode(&hint).unwrap();
    let mut rng = Rng(0xA1_1A);
    let mut panicking = None;
    for _ in 0..budget(20_000) {
        let mutated = engine.encode(mutate(&mut rng, &ipc));
        let kv = Some(vec![KeyValue::new("ARROW:schema".into(), mutated.clone())]);
        if quiver_core::error::contain_panic(|| {
            parquet_to_arrow_schema(meta.schema_descr(), kv.as_ref())
        })
        .is_err()
        {
            panicking = Some(kv);
            break;
        }
    }
    let kv = panicking.expect("no mutation of the hint made Arrow panic: the test lost its case");
    let lying_meta = FileMetaData::new(
        meta.version(),
        meta.num_rows(),
        meta.created_by().map(str::to_string),
        kv,
        meta.schema_descr_ptr(),
        meta.column_orders().cloned(),
    );
    let lying = ParquetMetaDataBuilder::new(lying_meta)
        .set_row_groups(metadata.row_groups().to_vec())
        .build();
    let mut bytes = data.to_vec();
    ParquetMetaDataWriter::new(&mut bytes, &lying)
        .finish()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hint.parquet");
    std::fs::write(&path, bytes).unwrap();
    let session = session(ExecutorKind::DataFusion);
    for sql in ["SELECT * FROM '{}'", "SELECT * FROM parquet_metadata('{}')"] {
        let sql = sql.replace("{}", &path.display().to_string());
        let run = AssertUnwindSafe(session.run(&sql)).catch_unwind().await;
        let error = match run.expect("the engine panicked") {
            Ok(_) => panic!("the malformed hint was believed: {sql}"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("ARROW:schema metadata is malformed") && error.contains("hint.parquet"),
            "{error}"
        );
    }
}

/// Pieces hostile text is made of: glob syntax, schemes, escapes, extreme numbers.
const PIECES: &[&str] = &[
    "*",
    "**",
    "?",
    "[",
    "]",
    "[!a-",
    "{",
    "}",
    ",",
    "..",
    "/",
    "//",
    "\\",
    "%",
    "%2F",
    "%zz",
    "a",
    "b.parquet",
    "=",
    "x=",
    "s3://",
    "https://",
    "http://",
    "file://",
    "gs://",
    ":",
    "@",
    "#",
    "?X-Amz-Signature=",
    "&",
    "-1",
    "0",
    "99999",
    "9223372036854775807",
    "-9223372036854775808",
    " ",
    "\u{0}",
    "é",
    "\u{202e}",
    "..\\..",
    "__HIVE_DEFAULT_PARTITION__",
];

fn hostile_text(rng: &mut Rng) -> String {
    (0..=rng.below(12)).map(|_| *rng.pick(PIECES)).collect()
}

#[test]
fn hostile_globs_paths_and_urls_give_errors_not_panics() {
    let mut rng = Rng(0x610B);
    let sources = Sources::default();
    let s3 = S3Options::default();
    for _ in 0..budget(5000) {
        let (text, other) = (hostile_text(&mut rng), hostile_text(&mut rng));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(glob) = GlobPattern::new(&text) {
                let _ = (glob.prefix(), glob.is_literal(), glob.matches(&other));
            }
            let _ = sources.for_path(&text, &s3);
            let _ = hive::segments(&text);
            let _ = hive::decode(&text);
            let _ = hive::decode(&hive::encode(Some(&text)));
        }));
        assert!(outcome.is_ok(), "panicked on {text:?} (and {other:?})");
    }
}

#[test]
fn coalesced_ranges_cover_every_input_byte_and_respect_the_cap() {
    let mut rng = Rng(0xC0A1_E5CE);
    for _ in 0..budget(3000) {
        let mut ranges: Vec<_> = (0..rng.below(20))
            .map(|_| {
                let start = rng.next() % (1 << 40);
                start..start + rng.next() % (64 << 20)
            })
            .collect();
        ranges.sort_by_key(|r| r.start);
        let options = FetchOptions {
            coalesce_gap: rng.next() % (4 << 20),
            max_coalesced_bytes: rng.next() % (32 << 20),
            ..FetchOptions::default()
        };
        let merged = coalesce(&ranges, &options);
        for range in ranges.iter().filter(|r| r.end > r.start) {
            // pieces are sorted, so one pass follows a range split over many
            let mut at = range.start;
            for piece in &merged {
                if piece.start <= at && at < piece.end {
                    at = piece.end;
                }
            }
            assert!(at >= range.end, "{range:?} not covered by {merged:?}");
        }
        let cap = options.max_coalesced_bytes.max(1);
        assert!(
            merged.windows(2).all(|w| w[0].end <= w[1].start),
            "{merged:?}"
        );
        assert!(merged.iter().all(|p| p.end - p.start <= cap), "{merged:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_fragments_give_errors_not_panics() {
    use quiver_core::fragment::{decode, encode, fragments};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    std::fs::write(&path, sample_file()).unwrap();
    let session = session(ExecutorKind::Fragments);
    let sql = format!(
        "SELECT name, sum(price), count(*) FROM '{}' WHERE id % 3 = 0 GROUP BY name",
        path.display()
    );
    let plan = session.physical_plan(&sql).await.unwrap();
    let bytes = encode(&fragments(&plan)[0]).unwrap();
    let context = session.context().task_ctx();
    let mut rng = Rng(0xF4A6_3E47);
    for i in 0..budget(2000) {
        let mutated = mutate(&mut rng, &bytes);
        let outcome = catch_unwind(AssertUnwindSafe(|| decode(&mutated, &context).map(|_| ())));
        match outcome {
            Err(_) => panic!("decoding panicked on {}", hex(&mutated)),
            Ok(Err(error)) => {
                keep_if_contained(&error.to_string(), "mutated fragment", i, &mutated)
            }
            Ok(Ok(())) => {}
        }
    }
}
