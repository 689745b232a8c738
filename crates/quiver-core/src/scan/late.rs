//! Late materialisation: where the scan projects wide rows beside its filters (ClickBench's
//! `SELECT * … WHERE URL LIKE '%google%' ORDER BY EventTime LIMIT 10`: 103 columns beside
//! 2), the decoder is given every filter, the static predicate above the scan and the dynamic
//! ones live (TopK's threshold tightens as it runs), so that it decodes the filters' columns
//! first and the other columns only for the rows that pass.
//!
//! It pays only for rows wide in columns: the decoder evaluates the filters, then reads
//! every other column row range by row range, and the operators above evaluate the filters
//! again. Over a few fixed-width columns beside the filter that cost more than it saved even
//! where the filter kept 4 to 20% of the rows (TPC-H Q19 1.4-1.7x, ClickBench q10 1.5x, TPC-DS
//! q26 1.7x, measured back to back), so the projection must hold at least `MIN_BESIDE` other
//! columns, and `WIDE` times the filters' bytes. Where the filters keep most rows it is work
//! done twice for nothing saved, so each partition judges, as the sieve does: once
//! `SAMPLE_ROWS` rows went through filters given to the decoder, it stops giving them if they
//! kept more than `KEEP_AT_MOST`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use parquet::file::metadata::ParquetMetaData;

/// Rows a partition judges the filters on: a row group of ClickBench's or TPC-H's.
const SAMPLE_ROWS: u64 = 100_000;

/// Filters that keep more than this share of rows are not given to the decoder any more:
/// decoding the wide columns of fewer rows no longer pays for the scattered reads.
const KEEP_AT_MOST: f64 = 0.5;

/// The projected columns that the filters do not name must hold at least this many times
/// the compressed bytes of those they name (ClickBench's `SELECT *` beside `URL` and
/// `EventTime`: 4.3 times).
const WIDE: f64 = 2.0;

/// The projected file columns that the filters do not name must be at least this many.
const MIN_BESIDE: usize = 8;

/// One partition's judgement of the filters given to its decoder.
#[derive(Debug, Default)]
pub(super) struct Late {
    rows_in: AtomicU64,
    rows_out: AtomicU64,
    stopped: AtomicBool,
}

impl Late {
    /// Whether the filters are still worth giving to the decoder.
    pub fn pays(&self) -> bool {
        !self.stopped.load(Relaxed)
    }

    /// `decoded`, a bucket of `rows` rows decoded under the filters, counting the rows that
    /// came out; the judgement falls once the sample is in.
    pub fn counted(
        self: &Arc<Self>,
        rows: u64,
        decoded: SendableRecordBatchStream,
    ) -> SendableRecordBatchStream {
        self.rows_in.fetch_add(rows, Relaxed);
        let late = Arc::clone(self);
        let schema = decoded.schema();
        let counted = decoded.map(move |batch| {
            let batch = batch?;
            let out = late.rows_out.fetch_add(batch.num_rows() as u64, Relaxed);
            late.judge(out + batch.num_rows() as u64);
            Ok(batch)
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, counted))
    }

    /// Stops the filters once they kept more than their share of the rows given to them.
    /// Rows are counted in per bucket, out per batch: a bucket judged before it is done
    /// counts its rows out so far against all of its rows in, so only a sample counts.
    fn judge(&self, rows_out: u64) {
        let rows_in = self.rows_in.load(Relaxed);
        if rows_in >= SAMPLE_ROWS && rows_out as f64 > KEEP_AT_MOST * rows_in as f64 {
            self.stopped.store(true, Relaxed);
        }
    }
}

/// Whether the projected columns (`projected`, by name) of `row_groups` in `metadata` are
/// wide beside `filtered`: at least `MIN_BESIDE` other file columns, holding at least `WIDE`
/// times the filtered columns' compressed bytes.
pub(super) fn is_wide(
    metadata: &ParquetMetaData,
    row_groups: &[usize],
    projected: &[&str],
    filtered: &[&str],
) -> bool {
    let mut bytes: HashMap<&str, i64> = HashMap::new();
    for &rg in row_groups {
        let Some(group) = metadata.row_groups().get(rg) else {
            continue;
        };
        for column in group.columns() {
            let root = column.column_descr().path().parts()[0].as_str();
            *bytes.entry(root).or_default() += column.compressed_size();
        }
    }
    let of = |name: &&str| bytes.get(name).copied().unwrap_or(0) as f64;
    let named: f64 = filtered.iter().map(of).sum();
    let beside: Vec<_> = projected
        .iter()
        .filter(|p| !filtered.contains(p) && bytes.contains_key(**p))
        .collect();
    let beside_bytes: f64 = beside.iter().map(|p| of(p)).sum();
    named > 0.0 && beside.len() >= MIN_BESIDE && beside_bytes >= WIDE * named
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    const TEXTS: [&str; 8] = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"];

    /// One row group of 1,000 rows: a small `id`, 8 text columns of 60 distinct bytes a row
    /// and a `long` one of 2,000.
    fn metadata() -> ParquetMetaData {
        let id = Field::new("id", DataType::Int64, false);
        let texts = TEXTS.map(|t| Field::new(t, DataType::Utf8, false));
        let long = Field::new("long", DataType::Utf8, false);
        let schema = Arc::new(Schema::new([vec![id], texts.to_vec(), vec![long]].concat()));
        let text = |width: usize| {
            let values = (0..1000).map(|i| format!("{i:0width$}"));
            Arc::new(StringArray::from_iter_values(values)) as _
        };
        let ids = Arc::new(Int64Array::from_iter_values(0..1000)) as _;
        let texts = (0..8).map(|_| text(60)).collect();
        let columns = [vec![ids], texts, vec![text(2000)]].concat();
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
        reader.metadata().clone()
    }

    #[test]
    fn a_projection_is_wide_with_many_columns_beside_the_filter_s_outweighing_them() {
        let metadata = metadata();
        let texts = [&["id"][..], &TEXTS].concat();
        assert!(is_wide(&metadata, &[0], &texts, &["id"]));
        assert!(
            is_wide(&metadata, &[0], &texts, &["t0"]),
            "id and 7 texts beside"
        );
        assert!(!is_wide(&metadata, &[0], &texts[..8], &["id"]), "7 beside");
        let all = [&texts[..], &["long"]].concat();
        assert!(
            !is_wide(&metadata, &[0], &all, &["long"]),
            "9 beside, of fewer bytes"
        );
        assert!(
            !is_wide(&metadata, &[], &texts, &["id"]),
            "no row group read"
        );
    }

    fn batches(rows: &[usize]) -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batches: Vec<_> = rows
            .iter()
            .map(|&n| {
                let ids = Int64Array::from_iter_values(0..n as i64);
                Ok(RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(ids)]).unwrap())
            })
            .collect();
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(batches),
        ))
    }

    #[tokio::test]
    async fn filters_that_keep_most_rows_stop_being_given_to_the_decoder() {
        // A bucket of 200,000 rows of which 10% came out: the filters still pay.
        let selective = Arc::new(Late::default());
        let out = selective.counted(200_000, batches(&[8192, 8192, 3616]));
        assert_eq!(out.count().await, 3);
        assert!(selective.pays());
        // 60% came out: stopped, and it stays so.
        let loose = Arc::new(Late::default());
        let out = loose.counted(200_000, batches(&[60_000, 60_000]));
        assert_eq!(out.count().await, 2);
        assert!(!loose.pays());
        let _ = loose.counted(200_000, batches(&[]));
        assert!(!loose.pays());
        // Below the sample nothing is judged.
        let small = Arc::new(Late::default());
        let _ = small.counted(1000, batches(&[1000])).count().await;
        assert!(small.pays());
    }
}
