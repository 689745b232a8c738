//! Compressed text files, inflated chunk by chunk as they arrive: gzip (`.gz`, several
//! members too) and zstd (`.zst`), as DuckDB reads them by their extension. The crates are
//! the ones the Parquet decoder already links.

use std::io::Write;

use bytes::Bytes;
use datafusion::arrow::error::ArrowError;

/// How a file's bytes are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// By the path's last extension.
    pub fn of_path(path: &str) -> Self {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".gz") {
            Self::Gzip
        } else if lower.ends_with(".zst") {
            Self::Zstd
        } else {
            Self::None
        }
    }

    /// DuckDB's `compression` option; `None` for `auto` (by extension) and names it lacks.
    pub fn named(name: &str) -> Option<Option<Self>> {
        match name.to_ascii_lowercase().as_str() {
            "auto" | "auto_detect" => Some(None),
            "none" | "uncompressed" => Some(Some(Self::None)),
            "gzip" | "gz" => Some(Some(Self::Gzip)),
            "zstd" => Some(Some(Self::Zstd)),
            _ => None,
        }
    }

    /// The path without its compression's extension (`f.csv.gz` is `f.csv`).
    pub fn strip(path: &str) -> &str {
        match Self::of_path(path) {
            Self::None => path,
            _ => path.rsplit_once('.').map_or(path, |(stem, _)| stem),
        }
    }
}

/// One file's inflater: compressed chunks in, text out.
pub struct Inflate(Inflater);

enum Inflater {
    None,
    Gzip(Box<flate2::write::MultiGzDecoder<Vec<u8>>>),
    Zstd(Box<zstd::stream::write::Decoder<'static, Vec<u8>>>),
}

impl Inflate {
    pub fn new(compression: Compression) -> Result<Self, ArrowError> {
        Ok(Self(match compression {
            Compression::None => Inflater::None,
            Compression::Gzip => {
                Inflater::Gzip(Box::new(flate2::write::MultiGzDecoder::new(vec![])))
            }
            Compression::Zstd => Inflater::Zstd(Box::new(
                zstd::stream::write::Decoder::new(vec![]).map_err(|e| failed("zstd", e))?,
            )),
        }))
    }

    /// The text `chunk` inflates to (some may come with the next chunk).
    pub fn apply(&mut self, chunk: Bytes) -> Result<Bytes, ArrowError> {
        match &mut self.0 {
            Inflater::None => Ok(chunk),
            Inflater::Gzip(gzip) => {
                gzip.write_all(&chunk).map_err(|e| failed("gzip", e))?;
                Ok(Bytes::from(std::mem::take(gzip.get_mut())))
            }
            Inflater::Zstd(zstd) => {
                zstd.write_all(&chunk).map_err(|e| failed("zstd", e))?;
                zstd.flush().map_err(|e| failed("zstd", e))?;
                Ok(Bytes::from(std::mem::take(zstd.get_mut())))
            }
        }
    }

    /// What is left once the last chunk went in; an error if the stream is cut short.
    pub fn finish(&mut self) -> Result<Bytes, ArrowError> {
        match &mut self.0 {
            Inflater::None => Ok(Bytes::new()),
            Inflater::Gzip(gzip) => {
                gzip.try_finish().map_err(|e| failed("gzip", e))?;
                Ok(Bytes::from(std::mem::take(gzip.get_mut())))
            }
            Inflater::Zstd(zstd) => {
                zstd.flush().map_err(|e| failed("zstd", e))?;
                Ok(Bytes::from(std::mem::take(zstd.get_mut())))
            }
        }
    }
}

/// The text a file's first bytes `sample` inflate to (`whole`: all of the file).
pub fn sample(compression: Compression, sample: Bytes, whole: bool) -> Result<Bytes, ArrowError> {
    let mut inflate = Inflate::new(compression)?;
    let text = inflate.apply(sample)?;
    match whole {
        true => Ok([text, inflate.finish()?].concat().into()),
        false => Ok(text),
    }
}

fn failed(format: &str, error: std::io::Error) -> ArrowError {
    ArrowError::ParseError(format!("not valid {format} data ({error})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflated(compression: Compression, compressed: &[u8], pieces: usize) -> Vec<u8> {
        let mut inflate = Inflate::new(compression).unwrap();
        let mut out = vec![];
        for piece in compressed.chunks(compressed.len().div_ceil(pieces)) {
            out.extend_from_slice(&inflate.apply(Bytes::copy_from_slice(piece)).unwrap());
        }
        out.extend_from_slice(&inflate.finish().unwrap());
        out
    }

    #[test]
    fn gzip_members_and_zstd_inflate_across_chunks() {
        let text: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("{i},x\n").into_bytes())
            .collect();
        let mut gzip = vec![];
        for half in text.chunks(text.len() / 2) {
            let mut member = flate2::write::GzEncoder::new(vec![], flate2::Compression::fast());
            member.write_all(half).unwrap();
            gzip.extend(member.finish().unwrap());
        }
        assert_eq!(inflated(Compression::Gzip, &gzip, 7), text);
        let zstd = zstd::encode_all(text.as_slice(), 1).unwrap();
        assert_eq!(inflated(Compression::Zstd, &zstd, 5), text);
    }

    #[test]
    fn a_cut_or_foreign_stream_is_an_error() {
        let mut inflate = Inflate::new(Compression::Gzip).unwrap();
        assert!(inflate
            .apply(Bytes::from_static(b"plain text, not gzip"))
            .is_err());
        assert_eq!(Compression::of_path("s3://b/t.csv.GZ"), Compression::Gzip);
        assert_eq!(Compression::strip("t.json.zst"), "t.json");
    }
}
