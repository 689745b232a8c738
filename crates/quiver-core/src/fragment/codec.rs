//! How a fragment travels: datafusion-proto with `QuiverCodec` for our scan, which is data
//! (schema, files, buckets) and goes as Arrow IPC (the schema) and JSON (the rest).

use std::io::Cursor;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx;
use datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};

use crate::bucket::Bucket;
use crate::in_turn::{InTurn, Joined};
use crate::scan::{BucketScanExec, ScanFile, ScanSummary};

/// Serialises a fragment as a worker receives it: datafusion-proto with our codec.
pub fn encode(fragment: &Arc<dyn ExecutionPlan>) -> Result<Vec<u8>> {
    Ok(physical_plan_to_bytes_with_extension_codec(Arc::clone(fragment), &QuiverCodec)?.to_vec())
}

/// A fragment from its bytes. They come from the network, and datafusion-proto (with
/// Arrow under it) asserts on some malformed plans, such as a column index past its
/// schema: those are errors here, not a worker's crash.
pub fn decode(bytes: &[u8], context: &TaskContext) -> Result<Arc<dyn ExecutionPlan>> {
    crate::error::contain_panic(|| {
        physical_plan_from_bytes_with_extension_codec(bytes, context, &QuiverCodec)
    })
    .map_err(|panic| DataFusionError::Plan(format!("malformed fragment: {panic}")))?
}

/// `plan`'s bytes, if they decode again: an expression that needs a value from above the
/// plan (a scalar subquery's) does not survive the trip, so such a plan cannot travel.
pub fn travelling_bytes(plan: &Arc<dyn ExecutionPlan>, context: &TaskContext) -> Result<Vec<u8>> {
    let bytes = encode(plan)?;
    decode(&bytes, context)?;
    Ok(bytes)
}

/// datafusion-proto codec for our scan and for a filter's `InTurn` (its parts travel as its
/// children; its own bytes are only a tag).
#[derive(Debug)]
pub struct QuiverCodec;

#[derive(serde::Serialize, serde::Deserialize)]
struct ScanMessage {
    file_columns: usize,
    projection: Option<Vec<usize>>,
    files: Vec<ScanFile>,
    partitions: Vec<Vec<Bucket>>,
    summary: ScanSummary,
}

impl PhysicalExtensionCodec for QuiverCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        decode_scan(buf)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let scan = node.downcast_ref::<BucketScanExec>().ok_or_else(|| {
            DataFusionError::NotImplemented(format!("cannot serialise {}", node.name()))
        })?;
        let mut schema_bytes = Vec::new();
        StreamWriter::try_new(&mut schema_bytes, scan.table_schema())?.finish()?;
        let message = ScanMessage {
            file_columns: scan.file_columns(),
            projection: scan.projection().cloned(),
            files: scan.files().as_ref().clone(),
            partitions: scan.partitions().to_vec(),
            summary: scan.summary().clone(),
        };
        buf.extend_from_slice(&(schema_bytes.len() as u32).to_le_bytes());
        buf.extend_from_slice(&schema_bytes);
        serde_json::to_writer(buf, &message).map_err(|e| DataFusionError::Internal(e.to_string()))
    }

    fn try_decode_expr(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn PhysicalExpr>],
        _ctx: &PhysicalExprDecodeCtx<'_>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let malformed =
            |what: &str| DataFusionError::Internal(format!("malformed fragment: {what}"));
        let joined = match buf {
            ALL_OF => Joined::All,
            ANY_OF => Joined::Any,
            _ => return Err(malformed("an unknown expression")),
        };
        if inputs.len() < 2 {
            return Err(malformed("an AND or OR of fewer than two parts"));
        }
        Ok(Arc::new(InTurn::new(joined, inputs.to_vec())?))
    }

    fn try_encode_expr(
        &self,
        node: &Arc<dyn PhysicalExpr>,
        buf: &mut Vec<u8>,
        _ctx: &PhysicalExprEncodeCtx<'_>,
    ) -> Result<()> {
        let Some(in_turn) = node.downcast_ref::<InTurn>() else {
            return Err(DataFusionError::NotImplemented(format!(
                "cannot serialise {node}"
            )));
        };
        buf.extend_from_slice(match in_turn.joined() {
            Joined::All => ALL_OF,
            Joined::Any => ANY_OF,
        });
        Ok(())
    }
}

/// The bytes that stand for an `InTurn` of each kind (its parts are its children).
const ALL_OF: &[u8] = b"all_of";
const ANY_OF: &[u8] = b"any_of";

/// A scan from its message: the table schema as Arrow IPC, then the rest as JSON.
fn decode_scan(buf: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
    let bad = |what: &str| DataFusionError::Internal(format!("malformed scan message: {what}"));
    let schema_len = u32::from_le_bytes(
        buf.get(..4)
            .ok_or_else(|| bad("too short"))?
            .try_into()
            .map_err(|_| bad("length"))?,
    ) as usize;
    let schema_end = schema_len.checked_add(4).ok_or_else(|| bad("length"))?;
    let schema_bytes = buf.get(4..schema_end).ok_or_else(|| bad("schema"))?;
    let schema: SchemaRef = StreamReader::try_new(Cursor::new(schema_bytes), None)?.schema();
    let message: ScanMessage =
        serde_json::from_slice(&buf[schema_end..]).map_err(|e| bad(&e.to_string()))?;
    Ok(Arc::new(BucketScanExec::try_new(
        schema,
        message.file_columns,
        message.projection,
        Arc::new(message.files),
        message.partitions,
        message.summary,
    )?))
}
