//! A table's columns: the file columns (from the first file's footer, the index, or every
//! footer when matched by name), typed as the session's Parquet settings say, with the
//! types a `schema =>` override gives, then the listing's hive and virtual columns.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::datasource::file_format::parquet::{
    transform_binary_to_string, transform_schema_to_view,
};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::type_coercion::binary::type_union_resolution;

use super::{QuiverTable, TableOptions};
use crate::error::QuiverError;
use crate::runtime::QuiverRuntime;
use crate::source::{listing_virtual_fields, Listing, ObjectMeta};

impl QuiverTable {
    /// The full table: file columns from the first file's footer (or from the index, when
    /// it describes that file as listed), with `schema_override`.
    pub async fn with_file_columns(
        &self,
        runtime: &QuiverRuntime,
        options: &TableOptions,
    ) -> Result<Self> {
        let listing = &self.listing;
        let first = listing.files.first().ok_or_else(|| QuiverError::NoMatch {
            pattern: self.patterns.join(", "),
        })?;
        let index = self.find_index(runtime, options).await?;
        let stored = match &index {
            _ if options.union_by_name => self.union_schema(runtime).await?,
            Some(index) if index.is_fresh(&first.meta) => index.data_schema().as_ref().clone(),
            _ => stored_schema(runtime, &first.meta).await?.as_ref().clone(),
        };
        let fields = typed_fields(stored, options);
        let file_columns = fields.len();
        let fields = listing_fields(listing, &fields, self.virtual_columns);
        Ok(Self {
            schema: Arc::new(Schema::new(fields)),
            file_columns,
            deferred: false,
            index,
            ..self.clone()
        })
    }

    /// Every file's columns by name, in the order they first appear, each with one type
    /// that all its files' types widen to. Reads every footer (the scan finds them cached).
    async fn union_schema(&self, runtime: &QuiverRuntime) -> Result<Schema> {
        let files: Vec<ObjectMeta> = self.listing.files.iter().map(|f| f.meta.clone()).collect();
        let mut schemas = vec![];
        for file in runtime.open_all(&files).await? {
            schemas.push((file.meta().path.clone(), file.arrow_schema()?));
        }
        union_by_name(&schemas)
    }

    /// The file columns, as the footers type them.
    pub(super) fn file_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.schema.fields()[..self.file_columns].to_vec(),
        ))
    }
}

/// The columns of `schemas` (each file's, named by its path) matched by name, in the order
/// they first appear, each with one type that all its files' types widen to.
pub(super) fn union_by_name(schemas: &[(String, SchemaRef)]) -> Result<Schema> {
    let mut fields: Vec<Field> = vec![];
    let mut first_seen: Vec<&str> = vec![];
    for (path, schema) in schemas {
        for field in schema.fields() {
            match fields.iter().position(|f| f.name() == field.name()) {
                None => {
                    fields.push(field.as_ref().clone().with_nullable(true));
                    first_seen.push(path);
                }
                Some(i) if fields[i].data_type() == field.data_type() => {}
                Some(i) => {
                    let types = [fields[i].data_type().clone(), field.data_type().clone()];
                    let Some(wider) = type_union_resolution(&types) else {
                        return Err(DataFusionError::Plan(format!(
                            "union_by_name: column '{}' is {} in {} but {} in {path}, and \
                             no type holds both",
                            field.name(),
                            types[0],
                            first_seen[i],
                            types[1]
                        )));
                    };
                    fields[i] = fields[i].clone().with_data_type(wider);
                }
            }
        }
    }
    Ok(Schema::new(fields))
}

/// The stored columns as the table types them: binaries as strings and strings as views
/// if the session's Parquet settings say so, and the override's types in place of the
/// stored ones (columns the files lack are added, nullable).
pub(super) fn typed_fields(stored: Schema, options: &TableOptions) -> Vec<Arc<Field>> {
    let stored = if options.binary_as_string {
        transform_binary_to_string(&stored)
    } else {
        stored
    };
    let stored = if options.view_types {
        transform_schema_to_view(&stored)
    } else {
        stored
    };
    let mut fields: Vec<Arc<Field>> = stored.fields().iter().cloned().collect();
    if let Some(wanted) = &options.schema_override {
        for field in wanted.fields() {
            match fields.iter().position(|f| f.name() == field.name()) {
                Some(i) => {
                    let typed = fields[i].as_ref().clone();
                    fields[i] = Arc::new(typed.with_data_type(field.data_type().clone()));
                }
                None => fields.push(Arc::new(Field::new(
                    field.name(),
                    field.data_type().clone(),
                    true,
                ))),
            }
        }
    }
    fields
}

/// `file_fields`, then the listing's hive and (if asked) virtual columns that the files do
/// not have.
pub(super) fn listing_fields(
    listing: &Listing,
    file_fields: &[Arc<Field>],
    virtual_columns: bool,
) -> Vec<Arc<Field>> {
    let mut fields = file_fields.to_vec();
    let virtual_fields = listing_virtual_fields();
    let virtual_fields: &[Arc<Field>] = if virtual_columns {
        &virtual_fields
    } else {
        &[]
    };
    for field in listing.hive_fields.iter().chain(virtual_fields) {
        if !fields.iter().any(|f| f.name() == field.name()) {
            fields.push(Arc::clone(field));
        }
    }
    fields
}

/// A file's columns as its footer stores them (read through the footer cache).
async fn stored_schema(runtime: &QuiverRuntime, meta: &ObjectMeta) -> Result<SchemaRef> {
    runtime.open(meta, None).await?.arrow_schema()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;

    fn schema(fields: &[(&str, DataType)]) -> SchemaRef {
        let fields: Vec<Field> = fields
            .iter()
            .map(|(name, t)| Field::new(*name, t.clone(), false))
            .collect();
        Arc::new(Schema::new(fields))
    }

    #[test]
    fn columns_by_name_widen_to_one_type_in_the_order_first_seen() {
        let a = schema(&[("id", DataType::Int32), ("x", DataType::Utf8)]);
        let b = schema(&[("y", DataType::Float64), ("id", DataType::Int64)]);
        let union = union_by_name(&[("a".into(), a), ("b".into(), b)]).unwrap();
        let names: Vec<_> = union.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "x", "y"]);
        assert_eq!(union.field(0).data_type(), &DataType::Int64);
        assert!(
            union.fields().iter().all(|f| f.is_nullable()),
            "a file may lack any"
        );
        let c = schema(&[
            ("id", DataType::Boolean),
            ("x", DataType::Struct(Default::default())),
        ]);
        let error = union_by_name(&[
            ("a".into(), schema(&[("x", DataType::Int32)])),
            ("c".into(), c),
        ])
        .unwrap_err();
        assert!(
            error.to_string().contains("column 'x' is Int32 in a but"),
            "{error}"
        );
    }

    #[test]
    fn an_override_retypes_stored_columns_and_adds_missing_ones() {
        let stored = schema(&[("id", DataType::Int32), ("blob", DataType::Binary)]);
        let options = TableOptions {
            binary_as_string: true,
            schema_override: Some(schema(&[
                ("id", DataType::Int64),
                ("extra", DataType::Utf8),
            ])),
            ..TableOptions::default()
        };
        let fields = typed_fields(stored.as_ref().clone(), &options);
        let typed: Vec<_> = fields
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect();
        assert_eq!(
            typed,
            [
                ("id", DataType::Int64),
                ("blob", DataType::Utf8),
                ("extra", DataType::Utf8)
            ]
        );
        assert!(fields[2].is_nullable());
    }
}
