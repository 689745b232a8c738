//! Quiver's two AWS Lambda functions. The coordinator plans each query and fans its
//! fragments out to worker functions through the Lambda executor
//! (`quiver_lambda_executor`, which the `quiver` command uses too); workers read their byte
//! ranges, run the fragment on all their vCPUs and return partial results; the coordinator
//! merges them.
//!
//! worker (runs a fragment) → coordinator (the function's events)

pub mod coordinator;
pub mod worker;
