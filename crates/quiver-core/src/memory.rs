//! What a query may hold in memory: `quiver.memory_limit` read as a number of bytes, its
//! default where the core runs, and the pool DataFusion's operators reserve from. Sorts and
//! aggregates spill to local disk when their share runs out; what cannot spill (a hash
//! join's build side) fails with an error that names the limit and the operators holding
//! the most, instead of the process being killed by the system.

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryPool, UnboundedMemoryPool};

/// DuckDB's default: 80% of the machine's (or the function's) memory. What DataFusion's
/// pool counts is the operators' large buffers, not every allocation, so the rest is room
/// for the batches in flight, the caches and the binary itself.
pub const SHARE_OF_MEMORY: f64 = 0.8;

/// Spilled runs a sort merges in one pass: 4. Unbounded (DataFusion's default), each
/// partition's merge reserves room for as many runs as the pool has left, so the first to
/// finish took it all and the final merge over the partitions failed (SF 1 lineitem sorted
/// under 256 MB). Bounded, a sort with more runs merges in more passes.
pub const SPILL_MERGE_FAN_IN: usize = 4;

/// Operators named in an out-of-memory error: those holding the most.
#[cfg(not(target_arch = "wasm32"))]
const TOP_CONSUMERS: usize = 5;

/// `quiver.memory_limit` in bytes; `None` is no limit.
///
/// `""` or `auto`: the default here (`default_limit`); `off`, `none` or `unlimited`: no
/// limit; `N%`: that share of this machine's memory; else a size as DuckDB writes them:
/// `512MB` and `2GB` in powers of 1,000, `512MiB` and `2GiB` (and DataFusion's `2G`) in
/// powers of 1,024, or plain bytes.
pub fn parse_limit(setting: &str) -> Result<Option<u64>> {
    let text = setting.trim().to_ascii_lowercase();
    let invalid = || {
        DataFusionError::Configuration(format!(
            "quiver.memory_limit: '{setting}' is not a size; write e.g. '4GB', '512MiB', \
             '50%' or 'off'"
        ))
    };
    match text.as_str() {
        "" | "auto" => return Ok(default_limit()),
        "off" | "none" | "unlimited" | "-1" => return Ok(None),
        _ => {}
    }
    if let Some(percent) = text.strip_suffix('%') {
        let share: f64 = percent.trim().parse().map_err(|_| invalid())?;
        if !(share > 0.0 && share <= 100.0) {
            return Err(invalid());
        }
        return Ok(machine_memory().map(|total| (total as f64 * share / 100.0) as u64));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| invalid())?;
    let scale: u64 = match unit.trim() {
        "" | "b" | "bytes" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        _ => return Err(invalid()),
    };
    let bytes = number * scale as f64;
    if !(bytes.is_finite() && bytes >= 1.0) {
        return Err(invalid());
    }
    Ok(Some(bytes as u64))
}

/// The limit when none is set: a share of the function's memory on Lambda, of this
/// machine's (or its container's) elsewhere natively, of the wasm heap in the browser.
pub fn default_limit() -> Option<u64> {
    let total = lambda_memory().or_else(machine_memory)?;
    Some((total as f64 * SHARE_OF_MEMORY) as u64)
}

/// The pool for `limit`: fair shares for the operators that can spill (each sort or
/// aggregate gets its part of what the others cannot give back), the largest consumers
/// named when a reservation fails.
#[cfg(not(target_arch = "wasm32"))]
pub fn pool(limit: Option<u64>) -> Arc<dyn MemoryPool> {
    use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
    use std::num::NonZeroUsize;
    match limit {
        None => Arc::new(UnboundedMemoryPool::default()),
        Some(bytes) => Arc::new(TrackConsumersPool::new(
            FairSpillPool::new(usize::try_from(bytes).unwrap_or(usize::MAX)),
            NonZeroUsize::new(TOP_CONSUMERS).expect("a positive count"),
        )),
    }
}

/// In the browser: first come, first served, on one atomic counter. Nothing spills there
/// (no disk), so the fair pool's shares between spilling operators buy nothing, and an
/// atomic takes no lock (docs/decisions.md, on parking_lot in wasm).
#[cfg(target_arch = "wasm32")]
pub fn pool(limit: Option<u64>) -> Arc<dyn MemoryPool> {
    match limit {
        None => Arc::new(UnboundedMemoryPool::default()),
        Some(bytes) => Arc::new(datafusion::execution::memory_pool::GreedyMemoryPool::new(
            usize::try_from(bytes).unwrap_or(usize::MAX),
        )),
    }
}

/// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, in MB, set by Lambda (and its emulators), in bytes.
pub fn lambda_memory() -> Option<u64> {
    let megabytes: u64 = std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(megabytes * 1024 * 1024)
}

/// This machine's memory, or its cgroup's limit when lower (a container's); read once
/// (a session and each statement ask for it).
#[cfg(target_os = "linux")]
fn machine_memory() -> Option<u64> {
    static MEMORY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *MEMORY.get_or_init(read_machine_memory)
}

#[cfg(target_os = "linux")]
fn read_machine_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?
        * 1024;
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|max| max.trim().parse::<u64>().ok());
    Some(cgroup.map_or(total, |limit| limit.min(total)))
}

/// The most a wasm32 heap can grow to (crates/quiver-wasm/build.rs lets it).
pub const WASM_HEAP_BYTES: u64 = 4 << 30;

/// The browser: the wasm heap's most. A sort or join past the limit then fails with an
/// error naming it (nothing spills: there is no disk) instead of the heap failing to grow,
/// which aborts the whole module.
#[cfg(target_arch = "wasm32")]
fn machine_memory() -> Option<u64> {
    Some(WASM_HEAP_BYTES)
}

/// Elsewhere (macOS, Windows) no share is known: no default limit.
#[cfg(not(any(target_os = "linux", target_arch = "wasm32")))]
fn machine_memory() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_duckdb_writes_them() {
        assert_eq!(parse_limit("256MB").unwrap(), Some(256_000_000));
        assert_eq!(parse_limit("256MiB").unwrap(), Some(256 << 20));
        assert_eq!(parse_limit("1.5GB").unwrap(), Some(1_500_000_000));
        assert_eq!(parse_limit("2G").unwrap(), Some(2 << 30));
        assert_eq!(parse_limit(" 4 gib ").unwrap(), Some(4 << 30));
        assert_eq!(parse_limit("1000000").unwrap(), Some(1_000_000));
        assert_eq!(parse_limit("off").unwrap(), None);
        assert_eq!(parse_limit("auto").unwrap(), default_limit());
        assert_eq!(parse_limit("").unwrap(), default_limit());
    }

    #[test]
    fn a_share_of_memory_follows_the_machine() {
        match machine_memory() {
            Some(total) => {
                let half = parse_limit("50%").unwrap().unwrap();
                assert!(half.abs_diff(total / 2) <= 1, "{half} of {total}");
            }
            None => assert_eq!(parse_limit("50%").unwrap(), None),
        }
    }

    #[test]
    fn nonsense_is_refused_with_an_example() {
        for bad in ["lots", "12 parsecs", "0", "-5MB", "150%", "0%", "1e999GB"] {
            let error = parse_limit(bad).unwrap_err().to_string();
            assert!(error.contains("'4GB'"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_limited_pool_refuses_what_does_not_fit() {
        use datafusion::execution::memory_pool::MemoryConsumer;
        let pool = pool(Some(1000));
        let reservation = MemoryConsumer::new("HashJoinInput").register(&pool);
        reservation.try_grow(800).unwrap();
        let error = reservation.try_grow(400).unwrap_err().to_string();
        assert!(error.contains("HashJoinInput"), "{error}");
        let unbounded = super::pool(None);
        let reservation = MemoryConsumer::new("sort").register(&unbounded);
        reservation.try_grow(1 << 40).unwrap();
    }
}
