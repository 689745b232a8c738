//! Parquet output with each row group's columns encoded on several threads. parquet-rs's
//! `ArrowWriter` encodes and compresses every column on the calling thread: exporting SF 1
//! lineitem kept one core busy for 3 s while the scan feeding it needed a fraction of the
//! other. Here each row group's columns are dealt to encoder threads (kept for the whole
//! file), every batch's columns go to their threads as it comes (nothing is held but what
//! is in flight: holding a row group's batches cost 56 MB), and the encoded chunks are
//! appended in schema order: the same file, written sooner.

use std::io::Write;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
    ArrowRowGroupWriterFactory,
};
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter};
use parquet::errors::{ParquetError, Result};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

pub struct ParquetSink<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    row_group_rows: usize,
    threads: usize,
    /// Encoder threads, started with the first row group when `threads` > 1 and kept for
    /// the whole file (threads started per row group held 60 MB more, in their heaps).
    encoders: Option<EncoderThreads>,
    /// The open row group and its rows so far (fewer than `row_group_rows`).
    open: Option<RowGroup>,
    open_rows: usize,
    row_groups: usize,
    /// Each column's encoded bytes in the last row group: how columns are dealt to threads.
    column_costs: Vec<u64>,
}

impl<W: Write + Send> ParquetSink<W> {
    /// A file of `schema` written to `out` with `properties` (its row group size too), its
    /// columns encoded on `threads` threads. The Arrow schema goes into the footer, as
    /// `ArrowWriter` puts it.
    pub fn try_new(
        out: W,
        schema: &SchemaRef,
        mut properties: WriterProperties,
        threads: usize,
    ) -> Result<Self> {
        let parquet_schema = ArrowSchemaConverter::new()
            .with_coerce_types(properties.coerce_types())
            .convert(schema)?;
        add_encoded_arrow_schema_to_metadata(schema, &mut properties);
        let row_group_rows = properties.max_row_group_row_count().unwrap_or(usize::MAX);
        let writer =
            SerializedFileWriter::new(out, parquet_schema.root_schema_ptr(), Arc::new(properties))?;
        let factory = ArrowRowGroupWriterFactory::new(&writer, Arc::clone(schema));
        let mut sink = Self {
            writer,
            factory,
            schema: Arc::clone(schema),
            row_group_rows: row_group_rows.max(1),
            threads: 1,
            encoders: None,
            open: None,
            open_rows: 0,
            row_groups: 0,
            column_costs: Vec::new(),
        };
        sink.set_threads(threads);
        Ok(sink)
    }

    /// How many threads encode (one in the browser, where threads cannot be spawned).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = if cfg!(target_arch = "wasm32") {
            1
        } else {
            threads.max(1)
        };
    }

    /// Takes `batch`, writing each row group as it fills.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut rest = batch.clone();
        while rest.num_rows() > 0 {
            let take = (self.row_group_rows - self.open_rows).min(rest.num_rows());
            self.encode(&rest.slice(0, take))?;
            self.open_rows += take;
            if self.open_rows == self.row_group_rows {
                self.close_row_group()?;
            }
            rest = rest.slice(take, rest.num_rows() - take);
        }
        Ok(())
    }

    /// Writes the last row group and the footer; the output, flushed by the caller.
    pub fn into_inner(mut self) -> Result<W> {
        self.close_row_group()?;
        self.writer.into_inner()
    }

    /// Hands `batch`'s columns to the open row group's encoders, opening one if needed.
    fn encode(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.open.is_none() {
            let writers = self.factory.create_column_writers(self.row_groups)?;
            let threads = self.threads.min(writers.len());
            self.open = Some(if threads <= 1 {
                RowGroup::Here(writers)
            } else {
                let encoders = self
                    .encoders
                    .get_or_insert_with(|| EncoderThreads::start(threads));
                RowGroup::Dealt(encoders.deal(writers, &self.column_costs))
            });
        }
        let mut leaves = Vec::new();
        for (field, column) in self.schema.fields().iter().zip(batch.columns()) {
            leaves.extend(compute_leaves(field, column)?);
        }
        match (&mut self.open, &self.encoders) {
            (Some(RowGroup::Here(writers)), _) => {
                for (writer, leaf) in writers.iter_mut().zip(&leaves) {
                    writer.write(leaf)?;
                }
                Ok(())
            }
            (Some(RowGroup::Dealt(columns)), Some(encoders)) => encoders.write(columns, leaves),
            _ => Err(ParquetError::General("no row group is open".into())),
        }
    }

    /// Ends the open row group: its chunks appended in order.
    fn close_row_group(&mut self) -> Result<()> {
        let chunks = match (self.open.take(), &self.encoders) {
            (None, _) => return Ok(()),
            (Some(RowGroup::Here(writers)), _) => writers
                .into_iter()
                .map(ArrowColumnWriter::close)
                .collect::<Result<Vec<_>>>()?,
            (Some(RowGroup::Dealt(columns)), Some(encoders)) => encoders.finish(&columns)?,
            (Some(RowGroup::Dealt(_)), None) => {
                return Err(ParquetError::General(
                    "no encoders for the row group".into(),
                ))
            }
        };
        self.open_rows = 0;
        self.column_costs = chunks
            .iter()
            .map(|chunk| chunk.close().metadata.compressed_size().max(0) as u64)
            .collect();
        let mut row_group = self.writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        self.row_groups += 1;
        Ok(())
    }
}

/// A row group being encoded: its writers on this thread, or dealt to the encoder threads
/// (each thread's column indexes).
enum RowGroup {
    Here(Vec<ArrowColumnWriter>),
    Dealt(Vec<Vec<usize>>),
}

/// What an encoder thread is told: its writers for a new row group, one batch's leaves for
/// them, or to close them and send back their chunks.
enum Job {
    Writers(Vec<ArrowColumnWriter>),
    Leaves(Vec<ArrowLeafColumn>),
    Close,
}

type Encoded = (usize, Result<Vec<ArrowColumnChunk>>);

struct EncoderThreads {
    jobs: Vec<SyncSender<Job>>,
    done: Receiver<Encoded>,
}

impl EncoderThreads {
    /// `count` threads, which end when this is dropped.
    fn start(count: usize) -> Self {
        let (send_done, done) = channel::<Encoded>();
        let jobs = (0..count)
            .map(|index| {
                // Two batches in flight per thread at most: memory stays bounded.
                let (send, receive) = sync_channel::<Job>(2);
                let send_done = send_done.clone();
                std::thread::spawn(move || {
                    let mut writers = Vec::new();
                    let mut failed = None;
                    for job in receive {
                        match job {
                            Job::Writers(given) => (writers, failed) = (given, None),
                            Job::Leaves(_) if failed.is_some() => {}
                            Job::Leaves(leaves) => {
                                for (writer, leaf) in writers.iter_mut().zip(&leaves) {
                                    if let Err(error) = writer.write(leaf) {
                                        failed = Some(error);
                                        break;
                                    }
                                }
                            }
                            Job::Close => {
                                let chunks = match failed.take() {
                                    Some(error) => Err(error),
                                    None => {
                                        writers.drain(..).map(ArrowColumnWriter::close).collect()
                                    }
                                };
                                if send_done.send((index, chunks)).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
                send
            })
            .collect();
        Self { jobs, done }
    }

    /// Deals a row group's `writers` to the threads by `costs` (see `deal`).
    fn deal(&self, writers: Vec<ArrowColumnWriter>, costs: &[u64]) -> Vec<Vec<usize>> {
        let columns = deal(writers.len(), self.jobs.len(), costs);
        let mut writers: Vec<Option<ArrowColumnWriter>> = writers.into_iter().map(Some).collect();
        for (share, jobs) in columns.iter().zip(&self.jobs) {
            let own = share.iter().filter_map(|&i| writers[i].take()).collect();
            // A thread that has gone answers `finish` with an error.
            let _ = jobs.send(Job::Writers(own));
        }
        columns
    }

    /// One batch's leaves (one per writer, in order), each to its column's thread.
    fn write(&self, columns: &[Vec<usize>], leaves: Vec<ArrowLeafColumn>) -> Result<()> {
        let mut leaves: Vec<Option<ArrowLeafColumn>> = leaves.into_iter().map(Some).collect();
        for (share, jobs) in columns.iter().zip(&self.jobs) {
            let own = share.iter().filter_map(|&i| leaves[i].take()).collect();
            jobs.send(Job::Leaves(own))
                .map_err(|_| ParquetError::General("a Parquet encoder thread stopped".into()))?;
        }
        Ok(())
    }

    /// The row group's chunks, in the writers' order.
    fn finish(&self, columns: &[Vec<usize>]) -> Result<Vec<ArrowColumnChunk>> {
        for jobs in &self.jobs {
            jobs.send(Job::Close)
                .map_err(|_| ParquetError::General("a Parquet encoder thread stopped".into()))?;
        }
        let mut chunks: Vec<Option<ArrowColumnChunk>> = Vec::new();
        chunks.resize_with(columns.iter().map(Vec::len).sum(), || None);
        for _ in 0..self.jobs.len() {
            let (thread, done) = self
                .done
                .recv()
                .map_err(|_| ParquetError::General("a Parquet encoder thread stopped".into()))?;
            for (&i, chunk) in columns[thread].iter().zip(done?) {
                chunks[i] = Some(chunk);
            }
        }
        chunks
            .into_iter()
            .map(|chunk| {
                chunk.ok_or_else(|| ParquetError::General("a column was not encoded".into()))
            })
            .collect()
    }
}

/// Column indexes `0..count` dealt to `threads` shares: the costliest first, each to the
/// share with the least so far; in turn when the costs are unknown. Each share ascending.
fn deal(count: usize, threads: usize, costs: &[u64]) -> Vec<Vec<usize>> {
    let mut shares: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); threads];
    let mut order: Vec<usize> = (0..count).collect();
    if costs.len() == count {
        order.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
    }
    for (turn, i) in order.into_iter().enumerate() {
        let share = match costs.len() == count {
            true => shares.iter_mut().min_by_key(|(cost, _)| *cost),
            false => shares.get_mut(turn % threads),
        }
        .expect("at least one share");
        share.0 += costs.get(i).copied().unwrap_or(0);
        share.1.push(i);
    }
    shares
        .into_iter()
        .map(|(_, mut share)| {
            share.sort_unstable();
            share
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use datafusion::arrow::array::{
        ArrayRef, Decimal128Array, Int64Array, ListArray, StringArray, StringViewArray,
    };
    use datafusion::arrow::datatypes::{Field, Int32Type, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;

    fn batch(start: i64, rows: usize) -> RecordBatch {
        let ids = Int64Array::from_iter_values(start..start + rows as i64);
        let names = StringArray::from_iter(
            (0..rows).map(|i| (i % 7 != 0).then(|| format!("name {}", start + i as i64))),
        );
        let views = StringViewArray::from_iter_values((0..rows).map(|i| "v".repeat(i % 20)));
        let prices = Decimal128Array::from_iter_values((0..rows).map(|i| i as i128 * 101 - 5000))
            .with_precision_and_scale(15, 2)
            .unwrap();
        let lists = ListArray::from_iter_primitive::<Int32Type, _, _>(
            (0..rows)
                .map(|i| (i % 5 != 0).then(|| (0..(i % 4) as i32).map(Some).collect::<Vec<_>>())),
        );
        let columns: Vec<ArrayRef> = vec![
            Arc::new(ids),
            Arc::new(names),
            Arc::new(views),
            Arc::new(prices),
            Arc::new(lists),
        ];
        let schema = Schema::new(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
                .collect::<Vec<_>>(),
        );
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    fn properties(rows: usize) -> WriterProperties {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows))
            .build()
    }

    fn read(bytes: Vec<u8>) -> (Vec<RecordBatch>, Vec<i64>) {
        let builder = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).unwrap();
        let sizes = builder
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        (
            builder.build().unwrap().map(Result::unwrap).collect(),
            sizes,
        )
    }

    #[test]
    fn writes_what_arrow_writer_writes_in_row_groups_of_the_set_size() {
        let batches = [batch(0, 700), batch(700, 1), batch(701, 1300)];
        let schema = batches[0].schema();
        let mut sink = ParquetSink::try_new(Vec::new(), &schema, properties(500), 3).unwrap();
        for batch in &batches {
            sink.write(batch).unwrap();
        }
        let (ours, sizes) = read(sink.into_inner().unwrap());
        assert_eq!(sizes, vec![500, 500, 500, 500, 1]);

        let mut reference =
            ArrowWriter::try_new(Vec::new(), schema, Some(properties(500))).unwrap();
        for batch in &batches {
            reference.write(batch).unwrap();
        }
        let (theirs, _) = read(reference.into_inner().unwrap());
        let whole = |b: &[RecordBatch]| {
            datafusion::arrow::compute::concat_batches(&b[0].schema(), b).unwrap()
        };
        assert_eq!(whole(&ours), whole(&theirs));
        assert_eq!(whole(&ours).num_rows(), 2001);
        assert_eq!(
            ours[0].schema(),
            theirs[0].schema(),
            "the Arrow schema travels"
        );
    }

    #[test]
    fn columns_are_dealt_by_their_cost() {
        assert_eq!(deal(5, 2, &[]), vec![vec![0, 2, 4], vec![1, 3]]);
        // A costly comment column alone on one thread, the rest on the other.
        assert_eq!(deal(4, 2, &[10, 10, 10, 50]), vec![vec![3], vec![0, 1, 2]]);
    }

    #[test]
    fn an_empty_answer_is_a_file_without_row_groups() {
        let schema = batch(0, 1).schema();
        let sink = ParquetSink::try_new(Vec::new(), &schema, properties(10), 2).unwrap();
        let (batches, sizes) = read(sink.into_inner().unwrap());
        assert!(sizes.is_empty());
        assert!(batches.is_empty());
    }
}
