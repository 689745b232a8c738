//! What a table knows from its listing alone: a row per file of its listing columns (hive,
//! then virtual), the files that filters on those columns keep, and, for a statement that
//! reads no file column, the answer itself.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions, UInt32Array};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::ScalarValue;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use super::QuiverTable;
use crate::prune::files_passing;
use crate::source::{ListedFile, VIRTUAL_COLUMNS};

impl QuiverTable {
    /// The virtual columns this table has (those a file column of the same name does not
    /// hide), which `*` leaves out.
    pub fn virtual_columns(&self) -> Vec<String> {
        self.listing_schema()
            .fields()
            .iter()
            .map(|field| field.name())
            .filter(|name| VIRTUAL_COLUMNS.contains(&name.as_str()) && !self.is_hive_column(name))
            .cloned()
            .collect()
    }

    /// Whether `column` comes from the listing (hive or virtual) rather than the files.
    pub fn is_listing_column(&self, column: &str) -> bool {
        self.schema
            .index_of(column)
            .map(|i| i >= self.file_columns)
            .unwrap_or(false)
    }

    fn is_hive_column(&self, column: &str) -> bool {
        self.listing.hive_fields.iter().any(|h| h.name() == column)
    }

    pub(super) fn listing_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.schema.fields()[self.file_columns..].to_vec(),
        ))
    }

    /// One row per file: the values of every listing column.
    pub(super) fn listing_batch(&self) -> Result<RecordBatch> {
        let schema = self.listing_schema();
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let values = self
                    .listing
                    .files
                    .iter()
                    .map(|file| self.listing_value(file, field.name()));
                ScalarValue::iter_to_array(values)
            })
            .collect::<Result<Vec<_>>>()?;
        // A table with no listing columns still has a row per file.
        let rows = RecordBatchOptions::new().with_row_count(Some(self.listing.files.len()));
        Ok(RecordBatch::try_new_with_options(schema, columns, &rows)?)
    }

    /// `file`'s value of the listing column `name`: a virtual one unless a hive column of
    /// that name hides it.
    fn listing_value(&self, file: &ListedFile, name: &str) -> ScalarValue {
        if let Some(index) = VIRTUAL_COLUMNS.iter().position(|v| *v == name) {
            if !self.is_hive_column(name) {
                return file.virtual_values()[index].clone();
            }
        }
        let hive = &self.listing.hive_fields;
        let index = hive.iter().position(|h| h.name() == name);
        index
            .and_then(|i| file.hive_values.get(i).cloned())
            .unwrap_or(ScalarValue::Null)
    }

    /// The files that pass the filters on listing columns (their indexes), and the
    /// listing's rows.
    pub(super) fn kept_files(
        &self,
        state: &dyn Session,
        filters: &[Expr],
    ) -> Result<(Vec<usize>, RecordBatch)> {
        let batch = self.listing_batch()?;
        let keep = files_passing(state, filters, &batch)?;
        let kept = (0..self.listing.files.len()).filter(|&i| keep[i]).collect();
        Ok((kept, batch))
    }

    /// A listing-only query's answer: the kept rows of the listing itself.
    pub(super) fn listing_scan(
        &self,
        kept: &[usize],
        listing_batch: &RecordBatch,
        projection: Option<&Vec<usize>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows: Vec<u32> = kept.iter().map(|&i| i as u32).collect();
        let batch =
            datafusion::arrow::compute::take_record_batch(listing_batch, &UInt32Array::from(rows))?;
        let listing_projection =
            projection.map(|p| p.iter().map(|&i| i - self.file_columns).collect::<Vec<_>>());
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.listing_schema(),
            listing_projection,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::QuiverRuntime;
    use crate::source::ListingOptions;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::prelude::{col, lit, SessionContext};

    /// `day=1/a.parquet`, `day=2/b.parquet`, `day=3/c.parquet` under a fresh folder, each
    /// of `day` rows (so of different sizes).
    fn hive_folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (day, name) in [(1, "a"), (2, "b"), (3, "c")] {
            let folder = dir.path().join(format!("day={day}"));
            std::fs::create_dir_all(&folder).unwrap();
            let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
            let column = Arc::new(Int64Array::from_iter_values(0..day * 1000));
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap();
            let file = std::fs::File::create(folder.join(format!("{name}.parquet"))).unwrap();
            let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
        }
        dir
    }

    #[tokio::test]
    async fn filters_on_listing_columns_keep_files_and_others_are_left_to_the_scan() {
        let dir = hive_folder();
        let pattern = format!("{}/**/*.parquet", dir.path().display());
        let options = ListingOptions {
            hive_partitioning: Some(true),
            ..Default::default()
        };
        let runtime = QuiverRuntime::default();
        let table = QuiverTable::list(&runtime, vec![pattern], &options, true)
            .await
            .unwrap();
        assert!(table.is_listing_column("day") && table.is_listing_column("_file"));
        assert_eq!(table.virtual_columns(), ["_path", "_file", "_size"]);
        let state = SessionContext::new().state();
        let kept = |filters: Vec<datafusion::logical_expr::Expr>| {
            table.kept_files(&state, &filters).unwrap().0
        };
        assert_eq!(kept(vec![]), [0, 1, 2]);
        assert_eq!(kept(vec![col("day").gt_eq(lit(2i64))]), [1, 2]);
        assert_eq!(kept(vec![col("_file").eq(lit("a.parquet"))]), [0]);
        // A filter on a file column, or on both kinds, drops nothing here.
        assert_eq!(kept(vec![col("x").eq(lit(5i64))]), [0, 1, 2]);
        let both = col("x").eq(lit(5i64)).or(col("day").eq(lit(1i64)));
        assert_eq!(kept(vec![both, col("day").lt(lit(3i64))]), [0, 1]);
        // The listing's own rows answer a listing-only scan.
        let (kept, batch) = table
            .kept_files(&state, &[col("day").eq(lit(3i64))])
            .unwrap();
        let plan = table.listing_scan(&kept, &batch, None).unwrap();
        let rows = datafusion::physical_plan::collect(plan, state.task_ctx())
            .await
            .unwrap();
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    }
}
