//! Footers: read and parsed once per file, shared by every bucket of that file. The first
//! read takes the file's last `ObjectSource::footer_read_bytes` in one request, which holds
//! the whole footer of nearly every file; a larger footer costs exactly one more request.
//! Where the footer's length is known (a Lambda worker, told by the planner), a large file's
//! first read is exactly the footer.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Statistics;
use futures::future::{BoxFuture, FutureExt};
use parquet::arrow::async_reader::MetadataFetch;
use parquet::arrow::parquet_to_arrow_schema;
use parquet::file::metadata::{
    FileMetaData, KeyValue, PageIndexPolicy, ParquetMetaData, ParquetMetaDataOptions,
    ParquetMetaDataReader, ParquetStatisticsPolicy,
};
use parquet::schema::types::TypePtr;
use tokio::sync::OnceCell;

use crate::error::{QuiverError, Result};
use crate::fixed_decimals::{plain_decimals, PlainDecimals};
use crate::metrics::{file_name, QueryMetrics, SpanKind};
use crate::read::ObjectReader;
use crate::source::{off_async, ObjectMeta};

/// The 8 bytes at the end of every Parquet file: footer length (u32 LE) and `PAR1`.
const FOOTER_TAIL: u64 = 8;

#[derive(Debug, Default)]
pub struct FooterCache {
    /// Keyed by path and version (etag, or size + mtime), so a rewritten file is re-read.
    /// One cell per file: buckets of a file that ask at once (a worker's partitions) share
    /// one read, the first asking and the others waiting for its answer.
    entries: Mutex<HashMap<(String, String), FooterCell>>,
    schemas: Arc<MappedSchemas>,
}

type FooterCell = Arc<OnceCell<Arc<Footer>>>;

/// A file's footer, once read: parsed, with its encoded length (`parquet_file_metadata`
/// reports it, and a Lambda worker is told it) and, from its first decoding on, its
/// fixed-length decimals unannotated.
#[derive(Debug)]
pub struct Footer {
    pub metadata: Arc<ParquetMetaData>,
    pub encoded_len: u64,
    /// Its Arrow schema, mapped as it was read (or why it cannot be).
    schema: MappedSchema,
    plain: OnceLock<Option<Arc<PlainDecimals>>>,
    /// What its row groups, all of them, say of the columns a statement read, as the planner
    /// gets them (`statistics`), by those columns and the schema they were read with.
    statistics: Mutex<Vec<(SchemaRef, SchemaRef, Arc<Statistics>)>>,
    /// The footer with its page index (column and offset indexes), read on first ask;
    /// `None` where the file has none that can be read (see `with_page_index`).
    page_index: OnceCell<Option<Arc<ParquetMetaData>>>,
}

/// A footer's Arrow schema, or why Arrow cannot map it.
type MappedSchema = std::result::Result<SchemaRef, String>;

/// Statistics kept per footer: a few projections (a session's queries over one table).
const KEPT_STATISTICS: usize = 8;

impl Footer {
    /// This footer with its fixed-length decimals unannotated, for its decoder (see
    /// `fixed_decimals`): built once while the cache holds the footer.
    pub fn plain_decimals(&self) -> Option<Arc<PlainDecimals>> {
        self.plain
            .get_or_init(|| plain_decimals(&self.metadata).map(Arc::new))
            .clone()
    }

    /// The statistics of `columns` (read with the file schema `stored`) over every row
    /// group, computed by `compute` the first time a statement asks: DataFusion's summary
    /// maps the footer's Arrow schema again on every call (a third of a `count(*)` over
    /// 100 files, planned again in the same session).
    pub fn statistics(
        &self,
        columns: &SchemaRef,
        stored: &SchemaRef,
        compute: impl FnOnce() -> Statistics,
    ) -> Arc<Statistics> {
        let same =
            |(c, s, _): &&(SchemaRef, SchemaRef, Arc<Statistics>)| c == columns && s == stored;
        let kept = self.statistics.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((.., statistics)) = kept.iter().find(same) {
            return Arc::clone(statistics);
        }
        drop(kept);
        let computed = Arc::new(compute());
        let mut kept = self.statistics.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == KEPT_STATISTICS {
            kept.remove(0);
        }
        kept.push((
            Arc::clone(columns),
            Arc::clone(stored),
            Arc::clone(&computed),
        ));
        computed
    }

    /// This footer with the file's page index (each page's min/max and where it lies), read
    /// from `reader` the first time a scan asks, in one request (often none: the index
    /// lies just before the footer, in the tail the footer was read with). `None` where
    /// the file has no page index, or one whose place or bytes are not sound: pages are
    /// then not pruned, and nothing else changes.
    pub async fn with_page_index(&self, reader: &ObjectReader) -> Option<Arc<ParquetMetaData>> {
        let load = || async {
            let range = page_index_range(&self.metadata, reader.object.size)?;
            let lane = format!("{} page index", file_name(&reader.object.path));
            let bytes = (reader
                .read_kept(range.clone(), SpanKind::Footer, &lane)
                .await)
                .ok()?;
            let mut loader = ParquetMetaDataReader::new_with_metadata((*self.metadata).clone())
                .with_page_index_policy(PageIndexPolicy::Optional);
            loader
                .load_page_index(Held(range.start, bytes))
                .await
                .ok()?;
            loader.finish().ok().map(Arc::new)
        };
        self.page_index.get_or_init(load).await.clone()
    }

    /// The Arrow schema it describes, mapped as it was read (see `MappedSchemas`).
    pub fn arrow_schema(&self, path: &str) -> Result<SchemaRef> {
        self.schema
            .clone()
            .map_err(|reason| QuiverError::NotParquet {
                path: path.to_string(),
                reason,
            })
    }
}

impl FooterCache {
    /// The footer of `reader`'s object, read now unless a read of this version is done
    /// or under way; `known_len`, the footer's encoded length when the planner knows it.
    pub async fn load(&self, reader: &ObjectReader, known_len: Option<u64>) -> Result<Arc<Footer>> {
        let meta = &reader.object;
        let key = (meta.path.clone(), meta.version.clone());
        let cell = Arc::clone(
            self.entries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key)
                .or_default(),
        );
        let mut read_here = false;
        let footer = cell
            .get_or_try_init(|| {
                read_here = true;
                async {
                    let (parsed, len, schema) =
                        read_footer(reader, known_len, &self.schemas).await?;
                    Ok::<_, QuiverError>(Arc::new(Footer {
                        metadata: Arc::new(parsed),
                        encoded_len: len,
                        schema,
                        plain: OnceLock::new(),
                        statistics: Mutex::default(),
                        page_index: OnceCell::new(),
                    }))
                }
            })
            .await?;
        if !read_here {
            QueryMetrics::add(&reader.metrics().footer_cache_hits, 1);
        }
        Ok(Arc::clone(footer))
    }

    /// The encoded length of a footer this cache holds.
    pub fn encoded_len(&self, meta: &ObjectMeta) -> Option<u64> {
        let key = (meta.path.clone(), meta.version.clone());
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(&key)?.get().map(|footer| footer.encoded_len)
    }
}

/// Where a file's page index lies (its column and offset indexes, together), if every
/// column chunk has both and the span lies inside the file's `size` and under 64 MiB: a
/// hostile footer cannot make a scan ask for bytes past the end, or for gigabytes.
fn page_index_range(metadata: &ParquetMetaData, size: u64) -> Option<Range<u64>> {
    const MOST: u64 = 64 << 20;
    let mut span: Option<Range<u64>> = None;
    for chunk in metadata.row_groups().iter().flat_map(|g| g.columns()) {
        let column = (chunk.column_index_offset()?, chunk.column_index_length()?);
        let offset = (chunk.offset_index_offset()?, chunk.offset_index_length()?);
        for (start, length) in [column, offset] {
            let start = u64::try_from(start).ok()?;
            let end = start.checked_add(u64::try_from(length).ok()?)?;
            span = Some(match span {
                Some(s) => s.start.min(start)..s.end.max(end),
                None => start..end,
            });
        }
    }
    span.filter(|s| s.end <= size && s.end - s.start <= MOST && s.start < s.end)
}

/// The page index's bytes, read already, served to Parquet's loader.
struct Held(u64, Bytes);

impl MetadataFetch for Held {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        // Parquet asks for spans of the same offsets the index was cut by, but a hostile
        // footer must give an error here, never an underflow.
        let start = range.start.checked_sub(self.0);
        let end = range.end.checked_sub(self.0);
        let held = match (start, end) {
            (Some(start), Some(end)) if start <= end && end as usize <= self.1.len() => {
                Some(self.1.slice(start as usize..end as usize))
            }
            _ => None,
        };
        async move {
            held.ok_or_else(|| {
                parquet::errors::ParquetError::General("outside the page index".into())
            })
        }
        .boxed()
    }
}

/// Arrow schemas mapped from footers (the one place a footer becomes a schema, so every
/// reader of a file agrees on its columns), by all that the mapping reads: the Parquet
/// schema and the key-value metadata (the `ARROW:schema` hint, and the rest, which the Arrow
/// schema keeps). The files of a table mostly share both, and mapping them again (decoding the
/// hint, visiting every column) was a seventh of a `count(*)` over 100 files; comparing
/// with a schema mapped before takes microseconds. Files that share a schema share its
/// `SchemaRef` too, so comparing their schemas later is comparing pointers. Footers parsed
/// at once may both miss and map one schema twice: both are kept, which costs a slot.
#[derive(Debug, Default)]
struct MappedSchemas(Mutex<VecDeque<KnownSchema>>);

#[derive(Debug)]
struct KnownSchema {
    parquet: TypePtr,
    key_values: Option<Vec<KeyValue>>,
    mapped: MappedSchema,
}

/// Schemas kept, the latest first: a table's files written by a few versions of a job.
const KEPT_SCHEMAS: usize = 8;

impl MappedSchemas {
    /// The Arrow schema `file` describes, or why Arrow cannot map it; an error where its
    /// `ARROW:schema` hint is malformed enough to panic Arrow (the panic's message).
    fn map(&self, file: &FileMetaData) -> std::result::Result<MappedSchema, String> {
        let descriptor = file.schema_descr();
        let key_values = file.key_value_metadata();
        let same = |known: &&KnownSchema| {
            known.key_values.as_ref() == key_values && *known.parquet == *descriptor.root_schema()
        };
        if let Some(known) = self.kept().iter().find(same) {
            return Ok(known.mapped.clone());
        }
        let mapped =
            crate::error::contain_panic(|| parquet_to_arrow_schema(descriptor, key_values))?
                .map(Arc::new)
                .map_err(|e| e.to_string());
        let mut kept = self.kept();
        kept.truncate(KEPT_SCHEMAS - 1);
        kept.push_front(KnownSchema {
            parquet: descriptor.root_schema_ptr(),
            key_values: key_values.cloned(),
            mapped: mapped.clone(),
        });
        Ok(mapped)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, VecDeque<KnownSchema>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The footer of `reader`'s object, parsed and checked, its encoded length, and its Arrow
/// schema (or why there is none), which checking it mapped (or found in `schemas`).
async fn read_footer(
    reader: &ObjectReader,
    known_len: Option<u64>,
    schemas: &Arc<MappedSchemas>,
) -> Result<(ParquetMetaData, u64, MappedSchema)> {
    let meta = &reader.object;
    let path = &meta.path;
    let not_parquet = |reason: &str| QuiverError::NotParquet {
        path: path.clone(),
        reason: reason.to_string(),
    };
    if meta.size < 12 {
        return Err(not_parquet(&format!(
            "{} bytes, too small to hold a footer",
            meta.size
        )));
    }
    // A small file's tail is the whole file, whatever its footer's length: its column chunks
    // then cost no second request. A wrong `known_len` costs one more, like a long footer.
    let read_bytes = reader.source.footer_read_bytes();
    let first = match known_len {
        Some(len) if meta.size > read_bytes => len.saturating_add(FOOTER_TAIL),
        _ => read_bytes,
    }
    .min(meta.size);
    let lane = format!("{} footer", file_name(path));
    let tail = (reader.read_kept(meta.size - first..meta.size, SpanKind::Footer, &lane)).await?;
    let end = &tail[tail.len() - FOOTER_TAIL as usize..];
    if &end[4..] != b"PAR1" {
        return Err(not_parquet(
            "it does not end with the Parquet magic bytes 'PAR1'; truncated or another format",
        ));
    }
    let footer_len = u32::from_le_bytes(end[..4].try_into().expect("4 bytes")) as u64;
    if footer_len + FOOTER_TAIL + 4 > meta.size {
        return Err(QuiverError::CorruptFooter {
            path: path.clone(),
            reason: format!(
                "footer length {footer_len} exceeds the file size {}",
                meta.size
            ),
        });
    }
    let needed = footer_len + FOOTER_TAIL;
    let footer = if needed <= first {
        tail.slice((first - needed) as usize..(first - FOOTER_TAIL) as usize)
    } else {
        // One more request for the part of the footer before what we already hold.
        let head = (reader.read_kept(
            meta.size - needed..meta.size - first,
            SpanKind::Footer,
            &lane,
        ))
        .await?;
        let mut joined = BytesMut::with_capacity(needed as usize);
        joined.extend_from_slice(&head);
        joined.extend_from_slice(&tail[..tail.len() - FOOTER_TAIL as usize]);
        joined.freeze()
    };
    // Parsed off the task that reads: the footers of many files, read 64 at once, parse on
    // as many threads as there are cores instead of one after another.
    let (schemas, data_end, named) = (Arc::clone(schemas), meta.size - needed, path.clone());
    let (parsed, schema) = off_async(path, move || {
        parse_footer(&footer, data_end, &schemas).map_err(|reason| QuiverError::CorruptFooter {
            path: named,
            reason,
        })
    })
    .await?;
    Ok((parsed, footer_len, schema))
}

/// A footer's bytes parsed and checked (`check_layout`), and its Arrow schema (or why there
/// is none); `data_end`, where the file's data ends and its footer begins.
fn parse_footer(
    footer: &Bytes,
    data_end: u64,
    schemas: &MappedSchemas,
) -> std::result::Result<(ParquetMetaData, MappedSchema), String> {
    let parsed = ParquetMetaDataReader::decode_metadata_with_options(footer, Some(&skipped()))
        .map_err(|e| e.to_string())?;
    check_layout(&parsed, data_end)?;
    // The `ARROW:schema` hint is decoded again wherever the file is read; a malformed one
    // that would panic Arrow is refused here, once. (A type Arrow cannot map is an error
    // for `arrow_schema` to report, naming the file, when a query needs the schema.)
    let schema = schemas
        .map(parsed.file_metadata())
        .map_err(|panic| format!("its ARROW:schema metadata is malformed ({panic})"))?;
    Ok((parsed, schema))
}

/// What no reader of ours looks at, left undecoded: each chunk's page encoding counts and
/// its size statistics (a parquet-rs writer's level histograms). A wide footer parses
/// faster, and every `quiver query` parses the footers it plans with.
fn skipped() -> ParquetMetaDataOptions {
    ParquetMetaDataOptions::new()
        .with_encoding_stats_policy(ParquetStatisticsPolicy::SkipAll)
        .with_size_stats_policy(ParquetStatisticsPolicy::SkipAll)
}

/// Checks what the planner and the decoder take on trust: no count is negative, each row
/// group has a chunk per column, a flat column's chunk holds a value per row of its group
/// (else `count(*)`, from the groups' counts, and the rows decoded would disagree), and
/// every chunk lies inside the file before its footer.
/// A corrupt or hostile footer fails here, naming the file, instead of asking for (and
/// allocating) the bytes it claims, or tripping an assertion in the reader.
fn check_layout(metadata: &ParquetMetaData, data_end: u64) -> std::result::Result<(), String> {
    let file = metadata.file_metadata();
    if file.num_rows() < 0 {
        return Err(format!("it declares {} rows", file.num_rows()));
    }
    let leaves = file.schema_descr().num_columns();
    for (i, row_group) in metadata.row_groups().iter().enumerate() {
        if row_group.num_rows() < 0 {
            return Err(format!(
                "row group {i} declares {} rows",
                row_group.num_rows()
            ));
        }
        if row_group.num_columns() != leaves {
            return Err(format!(
                "row group {i} has {} column chunks for {leaves} columns",
                row_group.num_columns()
            ));
        }
        for (leaf, column) in row_group.columns().iter().enumerate() {
            let flat = file.schema_descr().column(leaf).max_rep_level() == 0;
            if flat && column.num_values() != row_group.num_rows() {
                return Err(format!(
                    "row group {i} declares {} rows but its column {} holds {} values",
                    row_group.num_rows(),
                    column.column_path(),
                    column.num_values()
                ));
            }
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let length = column.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(length).ok())
                .and_then(|(start, length)| start.checked_add(length));
            if end.is_none_or(|end| end > data_end) {
                return Err(format!(
                    "row group {i} column {} claims {length} bytes at offset {start}, outside \
                     the file's {data_end} bytes of data",
                    column.column_path()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{LocalSource, ObjectSource};
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use std::sync::atomic::Ordering::Relaxed;

    /// A Parquet file of about 800 KB (no dictionary, no compression) and its footer length.
    async fn large_file(dir: &std::path::Path) -> (ObjectMeta, u64) {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let path = dir.join("large.parquet");
        let mut file = std::fs::File::create(&path).unwrap();
        let properties = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .build();
        let mut writer =
            ArrowWriter::try_new(&mut file, Arc::clone(&schema), Some(properties)).unwrap();
        let values = (0..100_000i64).map(|i| i.wrapping_mul(0x5851_F42D_4C95_7F2D));
        let column = Arc::new(Int64Array::from_iter_values(values));
        writer
            .write(&RecordBatch::try_new(schema, vec![column]).unwrap())
            .unwrap();
        writer.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let tail = &bytes[bytes.len() - 8..bytes.len() - 4];
        let footer_len = u32::from_le_bytes(tail.try_into().unwrap()) as u64;
        let meta = LocalSource.head(path.to_str().unwrap()).await.unwrap();
        (meta, footer_len)
    }

    /// A reader of `meta` on the local disk, with fresh metrics and caches.
    fn reader(meta: &ObjectMeta) -> ObjectReader {
        ObjectReader {
            source: Arc::new(LocalSource),
            object: meta.clone(),
            io: crate::read::QueryIo {
                disk: None,
                blocks: Arc::default(),
                metrics: Arc::default(),
                hedge: crate::source::HedgePolicy::default(),
            },
        }
    }

    /// Reads the footer with a cold cache; (requests, bytes read).
    async fn cold_read(meta: &ObjectMeta, known_len: Option<u64>) -> (u64, u64) {
        let reader = reader(meta);
        let metrics = reader.metrics();
        let footers = FooterCache::default();
        let parsed = footers.load(&reader, known_len).await.unwrap();
        assert_eq!(parsed.metadata.file_metadata().num_rows(), 100_000);
        (
            metrics.footer_requests.load(Relaxed),
            metrics.bytes_read.load(Relaxed),
        )
    }

    #[tokio::test]
    async fn a_known_footer_length_reads_exactly_the_footer_and_a_wrong_one_one_more_range() {
        let dir = tempfile::tempdir().unwrap();
        let (meta, footer_len) = large_file(dir.path()).await;
        let read_bytes = LocalSource.footer_read_bytes();
        assert!(meta.size > read_bytes && footer_len < read_bytes);
        assert_eq!(cold_read(&meta, None).await, (1, read_bytes));
        assert_eq!(
            cold_read(&meta, Some(footer_len)).await,
            (1, footer_len + FOOTER_TAIL)
        );
        // Too short (a hostile or stale request): the rest of the footer in a second read.
        assert_eq!(
            cold_read(&meta, Some(footer_len / 2)).await,
            (2, footer_len + FOOTER_TAIL)
        );
    }

    /// A small file of one Int64 column `x`, with `extra` as a key-value pair of its footer.
    async fn small_file(dir: &std::path::Path, name: &str, extra: Option<&str>) -> ObjectMeta {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        let mut writer = ArrowWriter::try_new(&mut file, Arc::clone(&schema), None).unwrap();
        if let Some(value) = extra {
            writer.append_key_value_metadata(parquet::file::metadata::KeyValue::new(
                "job".into(),
                value.to_string(),
            ));
        }
        let column = Arc::new(Int64Array::from_iter_values(0..10));
        writer
            .write(&RecordBatch::try_new(schema, vec![column]).unwrap())
            .unwrap();
        writer.close().unwrap();
        LocalSource.head(path.to_str().unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn files_of_one_schema_share_its_mapping_and_other_metadata_maps_anew() {
        let dir = tempfile::tempdir().unwrap();
        let footers = FooterCache::default();
        let mut schemas = Vec::new();
        for (name, extra) in [("a", None), ("b", None), ("c", Some("nightly"))] {
            let meta = small_file(dir.path(), name, extra).await;
            let footer = footers.load(&reader(&meta), None).await.unwrap();
            schemas.push(footer.arrow_schema(&meta.path).unwrap());
        }
        assert!(Arc::ptr_eq(&schemas[0], &schemas[1]), "mapped once");
        assert!(!Arc::ptr_eq(&schemas[0], &schemas[2]));
        // The metadata the mapping keeps is each file's own.
        assert_eq!(schemas[0].metadata().get("job"), None);
        assert_eq!(schemas[2].metadata().get("job").unwrap(), "nightly");
        assert_eq!(schemas[0].fields(), schemas[2].fields());
    }

    #[tokio::test]
    async fn buckets_that_ask_at_once_share_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let (meta, _) = large_file(dir.path()).await;
        let reader = reader(&meta);
        let metrics = reader.metrics();
        let footers = FooterCache::default();
        let loads = (0..4).map(|_| footers.load(&reader, None));
        let parsed = futures::future::try_join_all(loads).await.unwrap();
        assert!(parsed.iter().all(|p| Arc::ptr_eq(p, &parsed[0])));
        assert_eq!(metrics.footer_requests.load(Relaxed), 1);
        assert_eq!(metrics.footer_cache_hits.load(Relaxed), 3);
    }

    #[tokio::test]
    async fn a_footer_keeps_its_min_max_but_not_its_encoding_counts_or_size_statistics() {
        use datafusion::arrow::array::StringArray;
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let path = dir.path().join("s.parquet");
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = ArrowWriter::try_new(file, Arc::clone(&schema), None).unwrap();
        let column = Arc::new(StringArray::from(vec![Some("a"), None, Some("c")]));
        let batch = RecordBatch::try_new(schema, vec![column]).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let bytes = Bytes::from(std::fs::read(&path).unwrap());
        let full = ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .unwrap();
        let written = full.row_group(0).column(0);
        let counts = |c: &parquet::file::metadata::ColumnChunkMetaData| {
            c.page_encoding_stats().is_some() || c.page_encoding_stats_mask().is_some()
        };
        assert!(counts(written), "the writer wrote them");
        assert!(written.unencoded_byte_array_data_bytes().is_some());
        let meta = LocalSource.head(path.to_str().unwrap()).await.unwrap();
        let parsed = FooterCache::default().load(&reader(&meta), None).await;
        let parsed = parsed.unwrap();
        let chunk = parsed.metadata.row_group(0).column(0);
        assert!(!counts(chunk));
        assert!(chunk.unencoded_byte_array_data_bytes().is_none());
        assert!(chunk.definition_level_histogram().is_none());
        let statistics = chunk.statistics().expect("min/max kept");
        assert_eq!(statistics.min_bytes_opt(), Some(&b"a"[..]));
        assert_eq!(statistics.max_bytes_opt(), Some(&b"c"[..]));
        assert_eq!(statistics.null_count_opt(), Some(1));
    }

    #[tokio::test]
    async fn the_held_page_index_serves_only_what_it_holds() {
        let mut held = Held(100, Bytes::from_static(b"0123456789"));
        assert_eq!(held.fetch(102..105).await.unwrap().as_ref(), b"234");
        // Before the index, past its end, or backwards: an error, never a panic.
        let backwards = Range {
            start: 105,
            end: 102,
        };
        for range in [50..105, 105..111, backwards] {
            assert!(held.fetch(range).await.is_err());
        }
    }
}
