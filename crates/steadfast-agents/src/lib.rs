//! Steadfast inside Rust agents.
//!
//! WIP
#![warn(missing_docs)]

mod guard;
#[cfg(feature = "rig")]
pub mod rig;

pub use guard::{Guard, GuardBuilder};
