//! Link arguments of the browser module. Given here rather than in RUSTFLAGS, they leave
//! the flags of every other crate as the wasm32 builds had them, so builds share one cache.
//!
//! - Memory may grow to 4 GiB (wasm32's limit; the default for a shared memory is 1 GiB).
//! - The main stack is 8 MiB, as natively: DataFusion's planner recurses deeply, and the
//!   1 MiB default overflows on TPC-H in a debug build.
//! - The threads build imports a shared memory and exports its thread-local storage
//!   symbols, which wasm-bindgen needs to start Web Workers on the same memory; rustc no
//!   longer passes these for `+atomics` by itself.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("wasm32") {
        return;
    }
    let mut args = vec!["--max-memory=4294967296", "-zstack-size=8388608"];
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if features.split(',').any(|f| f == "atomics") {
        args.extend([
            "--shared-memory",
            "--import-memory",
            "--export=__wasm_init_tls",
            "--export=__tls_size",
            "--export=__tls_align",
            "--export=__tls_base",
        ]);
    }
    for arg in args {
        println!("cargo:rustc-link-arg-cdylib={arg}");
    }
}
