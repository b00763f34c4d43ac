//! The circuit-breaker layer.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use ::tower::{Layer, Service};
use tokio::time::Instant;

use crate::{CircuitBreaker, Classify, ErrorClass, OwnedPermit, Rejected};

/// Rejects calls while the breaker is open, and records each call's outcome: errors that
/// [`counts_as_breaker_failure`](crate::ErrorClass::counts_as_breaker_failure) count against
/// it, other errors and successes for it (slow successes against it, if the breaker has a
/// `slow_call_threshold`).
///
/// See the [module docs](crate::tower) for an example.
#[derive(Debug, Clone)]
pub struct CircuitBreakerLayer {
    breaker: CircuitBreaker,
}

impl CircuitBreakerLayer {
    /// A layer guarding calls with `breaker` (shared: every service it wraps feeds the same
    /// breaker).
    ///
    /// See the [module docs](crate::tower) for an example.
    pub fn new(breaker: CircuitBreaker) -> Self {
        Self { breaker }
    }
}

impl<S> Layer<S> for CircuitBreakerLayer {
    type Service = CircuitBreakerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService {
            inner,
            breaker: self.breaker.clone(),
        }
    }
}

/// The service produced by [`CircuitBreakerLayer`].
#[derive(Debug, Clone)]
pub struct CircuitBreakerService<S> {
    inner: S,
    breaker: CircuitBreaker,
}

impl<S> CircuitBreakerService<S> {
    /// The breaker guarding this service.
    ///
    /// ```
    /// use steadfast::tower::CircuitBreakerLayer;
    /// use tower::Layer;
    /// let svc = CircuitBreakerLayer::new(steadfast::CircuitBreaker::named("db", Default::default()))
    ///     .layer(tower::service_fn(|x: u8| async move { Ok::<_, std::io::Error>(x) }));
    /// assert_eq!(svc.breaker().name(), Some("db"));
    /// ```
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }
}

/// An error from a [`CircuitBreakerService`].
#[derive(Debug)]
pub enum BreakerError<E> {
    /// The breaker refused the call; the inner service was not called.
    Open(Rejected),
    /// The inner service failed.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for BreakerError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(r) => r.fmt(f),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for BreakerError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open(r) => Some(r),
            Self::Inner(e) => Some(e),
        }
    }
}

impl<E: Classify> Classify for BreakerError<E> {
    fn classify(&self) -> ErrorClass {
        match self {
            Self::Open(r) => r.class(),
            Self::Inner(e) => e.classify(),
        }
    }
}

impl<S, Req> Service<Req> for CircuitBreakerService<S>
where
    S: Service<Req>,
    S::Error: Classify,
{
    type Response = S::Response;
    type Error = BreakerError<S::Error>;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(BreakerError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self.breaker.try_acquire_owned() {
            Ok(permit) => {
                let started = self
                    .breaker
                    .config()
                    .slow_call_threshold()
                    .map(|_| Instant::now());
                ResponseFuture {
                    state: State::Running {
                        fut: self.inner.call(req),
                        permit: Some(permit),
                        started,
                    },
                }
            }
            Err(rejected) => ResponseFuture {
                state: State::Rejected {
                    rejected: Some(rejected),
                },
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`CircuitBreakerService`] call.
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running { #[pin] fut: F, permit: Option<OwnedPermit>, started: Option<Instant> },
        Rejected { rejected: Option<Rejected> },
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Classify,
{
    type Output = Result<T, BreakerError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Rejected { rejected } => Poll::Ready(Err(BreakerError::Open(
                rejected
                    .take()
                    .expect("ResponseFuture polled after completion"),
            ))),
            StateProj::Running {
                fut,
                permit,
                started,
            } => {
                let out = std::task::ready!(fut.poll(cx));
                if let Some(p) = permit.take() {
                    match (&out, started) {
                        (Ok(_), Some(t)) => p.success_after(t.elapsed()),
                        (Ok(_), None) => p.success(),
                        (Err(e), _) => p.record(e.classify().counts_as_breaker_failure()),
                    }
                }
                Poll::Ready(out.map_err(BreakerError::Inner))
            }
        }
    }
}
