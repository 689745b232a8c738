//! Avro object container files, as Iceberg writes its manifest lists and manifests: the
//! header's schema drives a small decoder into a tree of values. Only reading, and only
//! what the spec's binary encoding needs; codecs null, deflate, snappy and zstandard (the
//! ones Iceberg writers use), each through a crate the Parquet decoder already links.

use std::collections::HashMap;
use std::io::Read;

use serde_json::Value as Json;

/// A decoded value. Unions decode to the branch written; ints and longs are both `Long`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Long(i64),
    Float(f32),
    Double(f64),
    Bytes(Vec<u8>),
    String(String),
    Record(Vec<(String, Value)>),
    Array(Vec<Value>),
    Map(Vec<(String, Value)>),
}

impl Value {
    /// A record's field; `Null` when it has none of that name or is not a record.
    pub fn get(&self, name: &str) -> &Value {
        match self {
            Value::Record(fields) => fields
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&Value::Null, |(_, v)| v),
            _ => &Value::Null,
        }
    }

    pub fn as_long(&self) -> Option<i64> {
        match self {
            Value::Long(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    pub fn items(&self) -> &[Value] {
        match self {
            Value::Array(items) => items,
            _ => &[],
        }
    }
}

/// An Avro container file's records.
#[derive(Debug)]
pub struct Container {
    pub records: Vec<Value>,
}

/// Decodes a whole container file.
pub fn read_container(bytes: &[u8]) -> Result<Container, String> {
    let mut input = Input { bytes, at: 0 };
    if input.take(4)? != b"Obj\x01" {
        return Err("not an Avro file (no Obj\\x01 magic)".into());
    }
    let mut metadata = HashMap::new();
    for (key, value) in input.blocks(|input| {
        let key = input.string()?;
        Ok((key, input.bytes()?))
    })? {
        metadata.insert(key, value);
    }
    let sync = input.take(16)?.to_vec();
    let schema_text = metadata
        .get("avro.schema")
        .ok_or("the Avro header has no schema")?;
    let schema: Json = serde_json::from_slice(schema_text)
        .map_err(|e| format!("the Avro schema is not JSON: {e}"))?;
    let schema = Schema::parse(&schema, &mut HashMap::new())?;
    let codec = metadata
        .get("avro.codec")
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .unwrap_or_else(|| "null".into());
    let mut records = vec![];
    while input.at < bytes.len() {
        let count = input.long()?;
        let size = usize::try_from(input.long()?).map_err(|_| "a negative block size")?;
        let block = inflate(&codec, input.take(size)?)?;
        // Every record of Iceberg's takes a byte at least: a count beyond the bytes is
        // damage, not a reason to loop.
        if count < 0 || count as usize > block.len() {
            return Err("a block's record count does not fit its bytes".into());
        }
        if input.take(16)? != sync.as_slice() {
            return Err("a block does not end with the file's sync marker".into());
        }
        let mut block_input = Input {
            bytes: &block,
            at: 0,
        };
        for _ in 0..count {
            records.push(schema.decode(&mut block_input)?);
        }
    }
    Ok(Container { records })
}

fn inflate(codec: &str, block: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = vec![];
    match codec {
        "null" => out.extend_from_slice(block),
        "deflate" => {
            flate2::read::DeflateDecoder::new(block)
                .read_to_end(&mut out)
                .map_err(|e| format!("deflate: {e}"))?;
        }
        // The block, then the CRC-32 of what it inflates to.
        "snappy" if block.len() >= 4 => {
            out = snap::raw::Decoder::new()
                .decompress_vec(&block[..block.len() - 4])
                .map_err(|e| format!("snappy: {e}"))?;
        }
        "zstandard" => {
            out = zstd::stream::decode_all(block).map_err(|e| format!("zstandard: {e}"))?;
        }
        other => return Err(format!("Avro codec '{other}' is not supported")),
    }
    Ok(out)
}

/// A schema, with named types resolved.
#[derive(Debug, Clone)]
enum Schema {
    Null,
    Boolean,
    Int,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(Vec<String>),
    Array(Box<Schema>),
    Map(Box<Schema>),
    Union(Vec<Schema>),
    Record(Vec<(String, Schema)>),
}

impl Schema {
    /// `json` as a schema; `named` holds the records, enums and fixeds defined so far.
    fn parse(json: &Json, named: &mut HashMap<String, Schema>) -> Result<Self, String> {
        match json {
            Json::String(name) => Self::primitive(name)
                .or_else(|| named.get(name).cloned())
                .or_else(|| {
                    let short = name.rsplit('.').next()?;
                    named.get(short).cloned()
                })
                .ok_or_else(|| format!("Avro type '{name}' is not defined")),
            Json::Array(branches) => Ok(Self::Union(
                branches
                    .iter()
                    .map(|b| Self::parse(b, named))
                    .collect::<Result<_, _>>()?,
            )),
            Json::Object(object) => {
                let kind = object.get("type").ok_or("an Avro type without 'type'")?;
                let schema = match kind.as_str() {
                    Some("record") | Some("error") => {
                        let fields = object
                            .get("fields")
                            .and_then(Json::as_array)
                            .ok_or("an Avro record without fields")?;
                        let mut parsed = vec![];
                        for field in fields {
                            let name = field.get("name").and_then(Json::as_str);
                            let name = name.ok_or("an Avro field without a name")?;
                            let kind = field.get("type").ok_or("an Avro field without a type")?;
                            parsed.push((name.to_string(), Self::parse(kind, named)?));
                        }
                        Self::Record(parsed)
                    }
                    Some("enum") => Self::Enum(
                        object
                            .get("symbols")
                            .and_then(Json::as_array)
                            .ok_or("an Avro enum without symbols")?
                            .iter()
                            .map(|s| s.as_str().unwrap_or_default().to_string())
                            .collect(),
                    ),
                    Some("fixed") => Self::Fixed(
                        object
                            .get("size")
                            .and_then(Json::as_u64)
                            .ok_or("an Avro fixed without a size")?
                            as usize,
                    ),
                    Some("array") => Self::Array(Box::new(Self::parse(
                        object.get("items").ok_or("an Avro array without items")?,
                        named,
                    )?)),
                    Some("map") => Self::Map(Box::new(Self::parse(
                        object.get("values").ok_or("an Avro map without values")?,
                        named,
                    )?)),
                    // A primitive with attributes (a logical type): its encoding is the primitive's.
                    _ => return Self::parse(kind, named),
                };
                if let Some(name) = object.get("name").and_then(Json::as_str) {
                    named.insert(name.to_string(), schema.clone());
                    if let Some(short) = name.rsplit('.').next() {
                        named.insert(short.to_string(), schema.clone());
                    }
                }
                Ok(schema)
            }
            other => Err(format!("{other} is not an Avro schema")),
        }
    }

    fn primitive(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "int" | "long" => Self::Int,
            "float" => Self::Float,
            "double" => Self::Double,
            "bytes" => Self::Bytes,
            "string" => Self::String,
            _ => return None,
        })
    }

    fn decode(&self, input: &mut Input) -> Result<Value, String> {
        Ok(match self {
            Self::Null => Value::Null,
            Self::Boolean => Value::Boolean(input.take(1)?[0] != 0),
            Self::Int => Value::Long(input.long()?),
            Self::Float => Value::Float(f32::from_le_bytes(input.take(4)?.try_into().unwrap())),
            Self::Double => Value::Double(f64::from_le_bytes(input.take(8)?.try_into().unwrap())),
            Self::Bytes => Value::Bytes(input.bytes()?),
            Self::String => Value::String(input.string()?),
            Self::Fixed(size) => Value::Bytes(input.take(*size)?.to_vec()),
            Self::Enum(symbols) => {
                let index = input.long()?;
                let symbol = usize::try_from(index).ok().and_then(|i| symbols.get(i));
                Value::String(symbol.ok_or("an Avro enum index out of range")?.clone())
            }
            Self::Array(items) => Value::Array(input.blocks(|input| items.decode(input))?),
            Self::Map(values) => Value::Map(input.blocks(|input| {
                let key = input.string()?;
                Ok((key, values.decode(input)?))
            })?),
            Self::Union(branches) => {
                let index = input.long()?;
                let branch = usize::try_from(index).ok().and_then(|i| branches.get(i));
                branch
                    .ok_or("an Avro union index out of range")?
                    .decode(input)?
            }
            Self::Record(fields) => Value::Record(
                fields
                    .iter()
                    .map(|(name, schema)| Ok((name.clone(), schema.decode(input)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }
}

/// Bytes being decoded.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or("the Avro data ends too early")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// A zig-zag variable-length long (ints are encoded alike).
    fn long(&mut self) -> Result<i64, String> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err("an Avro long longer than ten bytes".into())
    }

    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let len = usize::try_from(self.long()?).map_err(|_| "a negative Avro length")?;
        Ok(self.take(len)?.to_vec())
    }

    fn string(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?).map_err(|_| "an Avro string that is not UTF-8".into())
    }

    /// The items of an array or map: blocks of a count (negative: then a byte size), ended
    /// by a zero count.
    fn blocks<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let mut items = vec![];
        loop {
            let mut count = self.long()?;
            if count == 0 {
                return Ok(items);
            }
            if count < 0 {
                count = count.checked_neg().ok_or("a damaged Avro block count")?;
                self.long()?;
            }
            if count as usize > self.bytes.len() - self.at {
                return Err("an Avro block count beyond its bytes".into());
            }
            for _ in 0..count {
                items.push(item(self)?);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes a long as Avro does.
    fn long(v: i64) -> Vec<u8> {
        let mut n = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = vec![];
        loop {
            if n < 0x80 {
                out.push(n as u8);
                return out;
            }
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
    }

    fn string(s: &str) -> Vec<u8> {
        let mut out = long(s.len() as i64);
        out.extend_from_slice(s.as_bytes());
        out
    }

    fn container(schema: &str, codec: &str, count: i64, data: &[u8]) -> Vec<u8> {
        let mut file = b"Obj\x01".to_vec();
        file.extend(long(2));
        file.extend(string("avro.schema"));
        file.extend(string(schema));
        file.extend(string("avro.codec"));
        file.extend(string(codec));
        file.extend(long(0));
        let sync = [7u8; 16];
        file.extend(sync);
        file.extend(long(count));
        file.extend(long(data.len() as i64));
        file.extend(data);
        file.extend(sync);
        file
    }

    #[test]
    fn records_with_unions_arrays_and_maps_decode_by_their_schema() {
        let schema = r#"{"type": "record", "name": "entry", "fields": [
            {"name": "id", "type": "long"},
            {"name": "path", "type": ["null", "string"]},
            {"name": "bounds", "type": {"type": "array", "items": {"type": "record",
                "name": "kv", "fields": [{"name": "key", "type": "int"},
                                         {"name": "value", "type": "bytes"}]}}},
            {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A", "B"]}},
            {"name": "again", "type": ["null", "kv"]},
            {"name": "props", "type": {"type": "map", "values": "double"}}]}"#;
        let mut data = vec![];
        data.extend(long(-300));
        data.extend(long(1));
        data.extend(string("s3://b/f.parquet"));
        data.extend(long(-1)); // one item, then its byte size
        data.extend(long(4));
        data.extend(long(3));
        data.extend(string("ab"));
        data.extend(long(0));
        data.extend(long(1));
        data.extend(long(0));
        data.extend(long(1));
        data.extend(string("x"));
        data.extend(1.5f64.to_le_bytes());
        data.extend(long(0));
        for codec in ["null", "deflate", "zstandard"] {
            let block = match codec {
                "deflate" => {
                    let mut encoder =
                        flate2::write::DeflateEncoder::new(vec![], flate2::Compression::default());
                    std::io::Write::write_all(&mut encoder, &data).unwrap();
                    encoder.finish().unwrap()
                }
                "zstandard" => zstd::stream::encode_all(data.as_slice(), 1).unwrap(),
                _ => data.clone(),
            };
            let file = read_container(&container(schema, codec, 1, &block)).unwrap();
            let record = &file.records[0];
            assert_eq!(record.get("id").as_long(), Some(-300), "{codec}");
            assert_eq!(record.get("path").as_str(), Some("s3://b/f.parquet"));
            let bounds = record.get("bounds").items();
            assert_eq!(bounds[0].get("key").as_long(), Some(3));
            assert_eq!(bounds[0].get("value").as_bytes(), Some(&b"ab"[..]));
            assert_eq!(record.get("kind").as_str(), Some("B"));
            assert_eq!(record.get("again"), &Value::Null);
            assert_eq!(
                record.get("props"),
                &Value::Map(vec![("x".into(), Value::Double(1.5))])
            );
        }
    }

    #[test]
    fn damaged_files_are_errors_not_panics() {
        let schema =
            r#"{"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}"#;
        let mut data = string("hello");
        let good = container(schema, "null", 1, &data);
        assert!(read_container(&good).is_ok());
        // A file cut right after its header holds no records; cut anywhere else, it is damaged.
        let header = good.len() - (2 + data.len() + 16);
        for cut in (0..good.len()).filter(|&cut| cut != header) {
            assert!(read_container(&good[..cut]).is_err(), "cut at {cut}");
        }
        data[0] = 0x7f; // a length past the end
        assert!(read_container(&container(schema, "null", 1, &data)).is_err());
        assert!(read_container(b"PAR1....").is_err());
        let error = read_container(&container(schema, "bzip2", 1, &data)).unwrap_err();
        assert!(error.contains("bzip2"), "{error}");
    }
}
