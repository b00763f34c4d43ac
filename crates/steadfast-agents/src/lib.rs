//! Steadfast inside Rust agents.
//!
//! WIP
#![warn(missing_docs)]

mod guard;
#[cfg(feature = "rig")]
pub mod rig;
#[cfg(feature = "synaptic")]
pub mod synaptic;
#[cfg(feature = "rmcp")]
pub mod mcp;

pub use guard::{Guard, GuardBuilder};
