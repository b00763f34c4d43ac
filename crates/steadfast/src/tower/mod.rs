//! tower middleware (feature `tower`): [`RetryLayer`] and [`CircuitBreakerLayer`].
//!
//! Both are thin: the retry layer runs the same engine as [`Retry::run`](crate::Retry::run)
//! (one attempt = one `ready` + `call` on a clone of the inner service), and the breaker layer
//! is [`CircuitBreaker::try_acquire_owned`](crate::CircuitBreaker::try_acquire_owned) around
//! each call. Order them like any tower layers. `RetryLayer` outside `CircuitBreakerLayer`
//! lets the breaker count every attempt and the retry engine see rejections as
//! `CIRCUIT_OPEN`, which it never retries; the other way round, the breaker counts whole calls.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use steadfast::tower::{CircuitBreakerLayer, RetryLayer};
//! use steadfast::{CircuitBreaker, ErrorClass, Retry, RetryPolicy};
//! use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let calls = Arc::new(AtomicU32::new(0));
//! let seen = calls.clone();
//! let svc = ServiceBuilder::new()
//!     .layer(RetryLayer::new(Retry::new(RetryPolicy::default())))
//!     .layer(CircuitBreakerLayer::new(CircuitBreaker::new(Default::default())))
//!     .service(service_fn(move |req: u32| {
//!         let n = seen.fetch_add(1, Ordering::SeqCst);
//!         async move { if n == 0 { Err(ErrorClass::from_status(503)) } else { Ok(req * 2) } }
//!     }));
//! assert_eq!(svc.oneshot(21).await.unwrap(), 42);
//! assert_eq!(calls.load(Ordering::SeqCst), 2);
//! # }
//! ```

mod breaker;
mod retry;

pub use breaker::{BreakerError, CircuitBreakerLayer, CircuitBreakerService, ResponseFuture};
pub use retry::{RetryLayer, RetryService};
