//! Code shared by the tests and the `replica` example.
pub mod replica;
