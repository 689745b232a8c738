//! `quiver cache show|clear`: the disk cache that keeps remote bytes between runs, seen
//! and emptied from the command line.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use quiver_core::{default_cache_dir, DiskCache};

#[derive(Args)]
pub struct CacheArgs {
    /// show: where it is and what it holds; clear: empty it.
    #[arg(value_enum)]
    action: CacheAction,
    /// The cache's folder (default: `$XDG_CACHE_HOME/quiver`, else `~/.cache/quiver`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum CacheAction {
    Show,
    Clear,
}

pub fn run(args: CacheArgs) -> Result<(), String> {
    let dir = args
        .dir
        .or_else(default_cache_dir)
        .ok_or("no cache folder: set HOME or XDG_CACHE_HOME, or pass --dir")?;
    if !dir.exists() {
        println!("{}: empty (no folder yet)", dir.display());
        return Ok(());
    }
    let cache = DiskCache::open(&dir, 0)
        .ok_or_else(|| format!("{}: not a folder the cache can use", dir.display()))?;
    match args.action {
        CacheAction::Show => println!("{}: {} held", dir.display(), size(cache.size())),
        CacheAction::Clear => println!("{}: {} freed", dir.display(), size(cache.clear())),
    }
    Ok(())
}

fn size(bytes: u64) -> String {
    format!("{:.1} MiB ({bytes} bytes)", bytes as f64 / (1 << 20) as f64)
}
