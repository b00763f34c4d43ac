//! A browser console for Steadfast: see and steer the job queues of a store (queues and their
//! counts, throughput and start latency over the last hour, jobs, dead letters, schedules,
//! per-key limits), live, with a few actions (retry, discard, pause, resume, cancel); and,
//! with the `gateway` feature, a running gateway ([`gateway_router`]: upstreams, tools and
//! their breakers, budgets, durable tool calls and their cancel, `/metrics`).
//!
//! Server-rendered HTML ([maud]) with charts drawn as SVG on the server, and a few lines of
//! plain JavaScript over server-sent events for live updates: no Node build step, no CDN.
//!
//! # Safe by default
//! Without an admin token the console answers only to loopback `Host`s, and [`serve`] refuses
//! a non-loopback address without one. With a token, a login page sets an `HttpOnly`,
//! `SameSite=Strict` session cookie. Every action is a POST carrying a CSRF token, from the
//! console's own `Origin`. Everything shown passes [`steadfast::sanitize`], and job arguments
//! are hidden unless [`ConsoleOptions::show_arguments`] says otherwise.
//!
//! # Embedding
//! [`jobs_router`] is an axum [`Router`](axum::Router): nest it in your service (set
//! [`ConsoleOptions::base_path`] to where you nest it). The shell it is built on (the
//! `security` and `shell` modules: the guard, sessions, CSRF, login page, layout and live
//! updates over a [`Pages`] source) is what the gateway's admin listener reuses.
//!
//! ```no_run
//! use steadfast_console::{ConsoleOptions, jobs_router, serve};
//! use steadfast_jobs::{Jobs, inspect::Inspector};
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let jobs = Jobs::builder().connect("sqlite://jobs.db").await?;
//! let app = jobs_router(Inspector::new(jobs), ConsoleOptions::new());
//! serve("127.0.0.1:9090".parse()?, app, &ConsoleOptions::new()).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod charts;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "gateway")]
mod gateway;
mod jobs;
pub mod layout;
mod options;
pub mod security;
mod serve;
pub mod shell;

#[cfg(feature = "gateway")]
pub use gateway::router as gateway_router;
pub use jobs::router as jobs_router;
pub use options::ConsoleOptions;
pub use serve::{ServeError, check_listen, serve, serve_on};
pub use shell::{PageError, Pages};
