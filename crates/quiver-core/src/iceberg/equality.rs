//! Equality delete files: rows of key columns (named by field id) whose matches in older
//! data files are deleted. One applies to a data file of a smaller sequence number, in the
//! same partition unless the delete is unpartitioned. Each group of data files that the same
//! deletes apply to is scanned with the keys, then anti-joined with the deletes' rows (NULL
//! matches NULL, as the spec says).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::{cast, concat_batches};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::{JoinType, NullEquality};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::ExecutionPlan;
use futures::future::try_join_all;

use super::deletes::delete_file_rows;
use super::manifests::ManifestEntry;
use super::spec::TableMetadata;
use crate::runtime::QuiverRuntime;
use crate::scan::{field_id, stored_field_id};

/// An equality delete file, read: its key columns (as the table names them) and rows.
#[derive(Debug)]
pub struct EqualityDelete {
    pub entry: ManifestEntry,
    pub columns: Vec<String>,
    rows: RecordBatch,
}

impl EqualityDelete {
    /// Whether it deletes rows of the data file `data`.
    pub fn applies_to(&self, data: &ManifestEntry, metadata: &TableMetadata) -> bool {
        let global = metadata
            .spec(self.entry.spec_id)
            .is_none_or(|spec| spec.fields.is_empty());
        data.sequence_number < self.entry.sequence_number
            && (global
                || (data.spec_id == self.entry.spec_id && data.partition == self.entry.partition))
    }
}

/// Every file of `deletes`, read whole, its columns matched to `schema`'s by field id.
pub async fn read_all(
    runtime: &QuiverRuntime,
    schema: &Schema,
    deletes: Vec<ManifestEntry>,
) -> Result<Vec<EqualityDelete>> {
    try_join_all(
        deletes
            .into_iter()
            .map(|entry| read_one(runtime, schema, entry)),
    )
    .await
}

async fn read_one(
    runtime: &QuiverRuntime,
    schema: &Schema,
    entry: ManifestEntry,
) -> Result<EqualityDelete> {
    let path = entry.path.clone();
    let fail = |e: &dyn std::fmt::Display| {
        DataFusionError::Plan(format!("{path}: not an equality delete file ({e})"))
    };
    let (stored, batches) = delete_file_rows(runtime, &entry, "an equality", None).await?;
    let rows = concat_batches(&stored, &batches)?;
    // Each stored column as the table's column of its field id (or, lacking ids, its name).
    let mut fields = vec![];
    let mut columns = vec![];
    for (i, field) in stored.fields().iter().enumerate() {
        let id = stored_field_id(field);
        let table_field = schema.fields().iter().find(|f| match id {
            Some(id) => field_id(f) == Some(id),
            None => f.name() == field.name(),
        });
        let Some(table_field) = table_field else {
            return Err(fail(&format!(
                "column {} is not in the table",
                field.name()
            )));
        };
        columns.push(cast(rows.column(i), table_field.data_type())?);
        fields.push(Field::new(
            table_field.name(),
            table_field.data_type().clone(),
            true,
        ));
    }
    let rows = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    Ok(EqualityDelete {
        columns: rows
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
        entry,
        rows,
    })
}

/// `plan`'s rows less those any of `deletes` matches; `plan` outputs every key column.
pub fn without_deleted(
    mut plan: Arc<dyn ExecutionPlan>,
    deletes: &[&EqualityDelete],
) -> Result<Arc<dyn ExecutionPlan>> {
    // Deletes on the same columns are one join.
    let mut key_sets: Vec<&Vec<String>> = deletes.iter().map(|d| &d.columns).collect();
    key_sets.sort();
    key_sets.dedup();
    for keys in key_sets {
        let output = plan.schema();
        let mut fields = vec![];
        for key in keys {
            let field = output.field_with_name(key)?;
            fields.push(Field::new(key, field.data_type().clone(), true));
        }
        let keys_schema: SchemaRef = Arc::new(Schema::new(fields));
        let batches = deletes
            .iter()
            .filter(|d| &d.columns == keys)
            .map(|d| retyped(&d.rows, &keys_schema))
            .collect::<Result<Vec<_>>>()?;
        let deleted = MemorySourceConfig::try_new_exec(&[batches], Arc::clone(&keys_schema), None)?;
        let on = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let probe = output.index_of(key)?;
                Ok((
                    Arc::new(Column::new(key, i)) as _,
                    Arc::new(Column::new(key, probe)) as _,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        // The deletes are the (small) build side; the data's rows without a match go on.
        plan = Arc::new(HashJoinExec::try_new(
            deleted,
            plan,
            on,
            None,
            &JoinType::RightAnti,
            None,
            PartitionMode::CollectLeft,
            NullEquality::NullEqualsNull,
            false,
        )?);
    }
    Ok(plan)
}

/// `rows` with `schema`'s columns, cast to its types.
fn retyped(rows: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| match rows.column_by_name(f.name()) {
            Some(column) => Ok(cast(column, f.data_type())?),
            None => Err(DataFusionError::Internal(format!(
                "no key column {}",
                f.name()
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}
