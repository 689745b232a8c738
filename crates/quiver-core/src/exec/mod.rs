//! Executors: who drives a physical plan. DataFusion on its own threads, or fragments
//! (see `fragment`) run by a `FragmentRunner` while the coordinator merges their outputs:
//! locally on rayon (the browser, `--executor fragments`, a Lambda worker's share), or on
//! Lambda workers (`quiver-lambda-executor`).
//!
//! runner (the trait) · compute (the pool fragments compute on) · cancel · local (a
//! fragment's partitions on that pool) · exchange (joins of two scans through a runner's
//! exchange) · broadcast (small build sides moved into their probe sides' fragments) ·
//! coordinator (the only one that recurses: build sides first, then fragments out to a
//! runner, outputs merged) · place (here or on Lambda, by the estimates: the `auto`
//! executor).

mod broadcast;
// The browser's merge checks for a cancel (`coordinator::merge`); natively, only tests use it.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod cancel;
mod compute;
mod coordinator;
mod exchange;
mod local;
pub mod place;
mod runner;

pub use compute::ComputePool;
pub use coordinator::{execute_with_fragments, travelling_fragments, with_build_sides};
pub use local::{run_fragment, run_partitions, RayonRunner};
pub use runner::{ExecutorKind, FragmentRunner};
