//! The command starts in a fresh process for every query, so its start-up counts, and so
//! does how its 96 MB of code is mapped (docs/decisions.md, "Speed").
//!
//! - As a position-independent executable, the dynamic loader applied 198,000 relocations to
//!   3 MB of pointer tables at every start (a third of `quiver query "SELECT 1"`): linked at
//!   a fixed address, it applies none.
//! - Segments aligned to 2 MiB (file offset and address equal modulo 2 MiB, as the kernel
//!   needs to map a whole 2 MiB folio of the page cache with one page-table entry): the
//!   code `code_pages` keeps cached in 2 MiB folios is then mapped 2 MiB per fault instead
//!   of 16 pages, fewer faults at start and fewer instruction-TLB misses in every query.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
        println!("cargo:rustc-link-arg-bins=-Wl,-z,max-page-size=2097152");
    }
}
