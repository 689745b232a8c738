//! The engine's integration tests, one binary (each binary links DataFusion again):
//! fragments that travel as bytes, and hostile input fuzzed with a fixed budget.

mod fragments;
mod hostile_input;
