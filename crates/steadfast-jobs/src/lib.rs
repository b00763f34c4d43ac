//! Durable retrying queues and schedules for Steadfast, on SQLite (embedded) or PostgreSQL
//! (many worker processes).
//!
//! Handlers are registered by name in code, with a typed payload, retry defaults, a
//! classifier and a `should_retry` veto; jobs carry only the name, a JSON payload and their
//! resolved [`RetryPolicy`](steadfast::RetryPolicy). Every retry decision is the core
//! library's — classification, `RetryPolicy::retry_delay`, the time budget, the circuit
//! breaker, the retry budget — unrolled through the database: a failed attempt stores
//! `run_at` and frees its worker at once, so nothing ever sleeps out a backoff.
//!
//! # Delivery
//! At least once, with leases renewed while a handler runs; a job whose worker died is
//! claimed again after its lease. [`JobContext::idempotency_key`] is stable across attempts
//! and workers, so side effects can be made exactly-once.
//!
//! # Tracing
//! Each attempt runs in a messaging `process {handler}` span with retry, dead-letter and
//! deferral events; the W3C trace context of whoever queued a job is stored with it and handed
//! to a [`TracePropagation`] to link or parent the attempt's span (see [`trace`]).
//!
//! See [`Jobs`] for a tour, `docs/jobs.md` for the design and the comparison with
//! Cloudflare's Agents SDK.

#![warn(missing_docs)]

mod claim;
#[cfg(feature = "cli")]
pub mod cli;
mod clock;
mod completer;
mod decide;
mod error;
mod guards;
mod handler;
pub mod inspect;
mod job;
mod jobs;
mod keys_seen;
mod limits;
mod options;
mod recurrence;
mod row;
mod stats;
mod store;
pub mod trace;
mod worker;
mod worker_config;
mod worker_loop;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::JobsError;
pub use guards::DependencyOptions;
pub use handler::{Handler, JobContext, Registered, handler};
pub use job::{Job, JobId, JobState, idempotency_key_for};
pub use jobs::{Jobs, JobsBuilder};
pub use limits::{KeyLimits, KeyStatus, QueueStatus};
pub use options::{CatchUp, JobOptions, ScheduleOptions, When};
pub use stats::describe_metrics;
pub use store::{Backend, Stats, Store, StoreOptions};
pub use trace::{TraceContext, TracePropagation};
pub use worker::{Worker, WorkerConfig, WorkerHandle};
