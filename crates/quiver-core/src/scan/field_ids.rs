//! Columns matched by field id rather than by name, for tables that say so (an Iceberg
//! table's columns carry their ids under `FIELD_ID`): a file written before a column was
//! renamed stores it under its old name and the same id. The planner renames a file's
//! stored columns before it plans (`renamed`), and the decoder's expression adapter does
//! the same before DataFusion's default one maps the rest by name and type.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_adapter::{
    DefaultPhysicalExprAdapterFactory, PhysicalExprAdapter, PhysicalExprAdapterFactory,
};

/// The metadata key of a table column's field id, when the table matches columns by it.
pub const FIELD_ID: &str = "quiver:field_id";

/// What Parquet writers (and arrow's reader) call a column's field id.
const PARQUET_FIELD_ID: &str = "PARQUET:field_id";

/// A table column's field id, when the table matches columns by it.
pub fn field_id(field: &Field) -> Option<i32> {
    field.metadata().get(FIELD_ID)?.parse().ok()
}

/// A stored column's field id, as its writer gave it.
pub fn stored_field_id(field: &Field) -> Option<i32> {
    field.metadata().get(PARQUET_FIELD_ID)?.parse().ok()
}

/// `stored` with each top-level column named as the table's column of the same field id;
/// a stored column whose id the table lacks is hidden (a dropped column must not match a
/// later one of its name). `None` when the table does not match by id or nothing changes.
pub fn renamed(table: &Schema, stored: &Schema) -> Option<Schema> {
    let names: HashMap<&str, &str> = table
        .fields()
        .iter()
        .filter_map(|f| Some((f.metadata().get(FIELD_ID)?.as_str(), f.name().as_str())))
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut changed = false;
    let fields: Vec<Field> = stored
        .fields()
        .iter()
        .map(|field| {
            let id = field.metadata().get(PARQUET_FIELD_ID).map(String::as_str);
            let name = match id {
                Some(id) => match names.get(id) {
                    Some(name) => name.to_string(),
                    None => format!("__dropped_field_{id}"),
                },
                None => field.name().clone(),
            };
            changed |= &name != field.name();
            field.as_ref().clone().with_name(name)
        })
        .collect();
    changed.then(|| Schema::new_with_metadata(fields, stored.metadata().clone()))
}

/// The decoder's expression adapter: DataFusion's, over the file's columns renamed by
/// field id; the columns it then refers to get their stored names back (the reader finds
/// them by name and index).
#[derive(Debug)]
pub struct ByFieldId;

impl PhysicalExprAdapterFactory for ByFieldId {
    fn create(
        &self,
        logical: SchemaRef,
        physical: SchemaRef,
    ) -> Result<Arc<dyn PhysicalExprAdapter>> {
        let Some(renamed) = renamed(&logical, &physical) else {
            return DefaultPhysicalExprAdapterFactory.create(logical, physical);
        };
        let inner = DefaultPhysicalExprAdapterFactory.create(logical, Arc::new(renamed))?;
        Ok(Arc::new(StoredNames { inner, physical }))
    }
}

#[derive(Debug)]
struct StoredNames {
    inner: Arc<dyn PhysicalExprAdapter>,
    physical: SchemaRef,
}

impl PhysicalExprAdapter for StoredNames {
    fn rewrite(&self, expr: Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        let rewritten = self.inner.rewrite(expr)?;
        rewritten
            .transform(|e| {
                let Some(column) = e.downcast_ref::<Column>() else {
                    return Ok(Transformed::no(e));
                };
                match self.physical.fields().get(column.index()) {
                    Some(stored) if stored.name() != column.name() => Ok(Transformed::yes(
                        Arc::new(Column::new(stored.name(), column.index())),
                    )),
                    _ => Ok(Transformed::no(e)),
                }
            })
            .data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;

    fn field(name: &str, key: &str, id: &str) -> Field {
        Field::new(name, DataType::Int64, true).with_metadata([(key.into(), id.into())].into())
    }

    #[test]
    fn stored_columns_take_the_table_names_of_their_ids() {
        let table = Schema::new(vec![
            field("id", FIELD_ID, "1"),
            field("full_name", FIELD_ID, "2"),
            field("name", FIELD_ID, "5"),
        ]);
        let stored = Schema::new(vec![
            field("id", PARQUET_FIELD_ID, "1"),
            field("name", PARQUET_FIELD_ID, "2"),
            field("old", PARQUET_FIELD_ID, "3"),
        ]);
        let renamed = renamed(&table, &stored).unwrap();
        let names: Vec<_> = renamed.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "full_name", "__dropped_field_3"]);
        // A table that does not match by id, or a file already in its names: nothing to do.
        let plain = Schema::new(vec![Field::new("name", DataType::Int64, true)]);
        assert!(renamed_none(&plain, &stored));
        let same = Schema::new(vec![field("id", PARQUET_FIELD_ID, "1")]);
        assert!(renamed_none(&table, &same));
    }

    fn renamed_none(table: &Schema, stored: &Schema) -> bool {
        renamed(table, stored).is_none()
    }
}
