//! Handlers: code registered by name, with its payload type, retry defaults, classifier and
//! `should_retry` next to it — so they apply to stored jobs, which carry only a name and JSON.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use steadfast::{Classify, ErrorClass, ErrorCode, ErrorKind, RetryPolicyBuilder};
use tokio_util::sync::CancellationToken;

use crate::job::{JobId, idempotency_key_for};
use crate::trace::TraceContext;

/// What a handler knows about the attempt it runs.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) id: JobId,
    pub(crate) attempt: u32,
    pub(crate) fire_at: Option<DateTime<Utc>>,
    pub(crate) cancel: CancellationToken,
    pub(crate) trace: Option<TraceContext>,
}

impl JobContext {
    /// The job's id.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// This attempt, 1-based.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// A key that is the same for every attempt of this job, on every worker: pass it to the
    /// dependency (or an idempotency store) so the side effect happens once.
    pub fn idempotency_key(&self) -> String {
        idempotency_key_for(self.id)
    }

    /// For a scheduled run, the fire time it stands for.
    pub fn fire_at(&self) -> Option<DateTime<Utc>> {
        self.fire_at
    }

    /// The W3C trace context stored when the job was queued (see
    /// [`JobOptions::traceparent`](crate::JobOptions::traceparent)), for a handler that
    /// continues that trace in what it calls (an HTTP `traceparent` header, an MCP `_meta`).
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// Cancelled when the worker shuts down past its grace period or loses the job's lease:
    /// the attempt's result will not be recorded, so stop early.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }
}

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A handler's failure, classified and ready to store (the message is not yet sanitized).
#[derive(Debug, Clone)]
pub(crate) struct HandlerFailure {
    pub class: ErrorClass,
    pub message: String,
    pub declined: bool,
}

type RunFn = dyn Fn(JobContext, &str) -> BoxFuture<Result<(), HandlerFailure>> + Send + Sync;

/// A handler with its type erased, as the worker holds it.
#[derive(Clone)]
pub struct Registered {
    pub(crate) name: String,
    pub(crate) retry: RetryPolicyBuilder,
    pub(crate) dependency: Option<String>,
    pub(crate) limit_key: Option<String>,
    pub(crate) priority: i32,
    pub(crate) run: Arc<RunFn>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("name", &self.name)
            .field("dependency", &self.dependency)
            .finish_non_exhaustive()
    }
}

type Classifier<E> = Arc<dyn Fn(&E) -> Option<ErrorClass> + Send + Sync>;
type ShouldRetry<E> = Arc<dyn Fn(&E, &ErrorClass, u32) -> bool + Send + Sync>;

/// A handler under construction: `handler(name, f)` then options, then register it.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{ErrorClass, RetryPolicy};
/// use steadfast_jobs::{JobContext, handler};
///
/// #[derive(serde::Deserialize)]
/// struct Email { to: String }
///
/// let h = handler("send_email", |ctx: JobContext, email: Email| async move {
///     // ctx.idempotency_key() makes the send exactly-once at the provider.
///     let _ = (ctx.idempotency_key(), email.to);
///     Ok::<(), ErrorClass>(())
/// })
/// .retry(RetryPolicy::builder().max_attempts(8).base_delay(Duration::from_secs(1)))
/// .dependency("smtp")
/// .should_retry(|_err, class, attempt| class.status != Some(422) && attempt < 6);
/// # let _ = h;
/// ```
pub struct Handler<P, E, F> {
    name: String,
    f: F,
    retry: RetryPolicyBuilder,
    dependency: Option<String>,
    limit_key: Option<String>,
    priority: i32,
    classify: Option<Classifier<E>>,
    should_retry: Option<ShouldRetry<E>>,
    _p: PhantomData<fn(P)>,
}

/// Starts a handler: `name` is what jobs are queued under; `f` runs one attempt.
pub fn handler<P, E, F, Fut>(name: impl Into<String>, f: F) -> Handler<P, E, F>
where
    P: DeserializeOwned + Send + 'static,
    E: Classify + Display + Send + 'static,
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    Handler {
        name: name.into(),
        f,
        retry: RetryPolicyBuilder::default(),
        dependency: None,
        limit_key: None,
        priority: 0,
        classify: None,
        should_retry: None,
        _p: PhantomData,
    }
}

impl<P, E, F, Fut> Handler<P, E, F>
where
    P: DeserializeOwned + Send + 'static,
    E: Classify + Display + Send + 'static,
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    /// Retry defaults of this handler, layered on the worker-wide defaults (a job's own
    /// options layer on top).
    pub fn retry(mut self, layer: RetryPolicyBuilder) -> Self {
        self.retry = layer;
        self
    }

    /// The dependency this handler calls: its circuit breaker, retry budget and concurrency
    /// limit are shared by every handler that names it.
    pub fn dependency(mut self, name: impl Into<String>) -> Self {
        self.dependency = Some(name.into());
        self
    }

    /// The default key of this handler's jobs (a job's own
    /// [`JobOptions::limit_key`](crate::JobOptions::limit_key) wins): its limits and pause
    /// apply across every worker sharing the store.
    pub fn limit_key(mut self, key: impl Into<String>) -> Self {
        self.limit_key = Some(key.into());
        self
    }

    /// The default priority of this handler's jobs (-1000 to 1000; higher runs first).
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }

    /// A classifier consulted before the error's own [`Classify`] (`None` falls through).
    pub fn classify(
        mut self,
        f: impl Fn(&E) -> Option<ErrorClass> + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(f));
        self
    }

    /// A veto on retries: called with the error, its class and the attempt that failed; false
    /// dead-letters the job.
    pub fn should_retry(
        mut self,
        f: impl Fn(&E, &ErrorClass, u32) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.should_retry = Some(Arc::new(f));
        self
    }

    pub(crate) fn erase(self) -> Registered {
        let Handler {
            name,
            f,
            retry,
            dependency,
            limit_key,
            priority,
            classify,
            should_retry,
            _p,
        } = self;
        let f = Arc::new(f);
        let run = move |ctx: JobContext, payload: &str| -> BoxFuture<Result<(), HandlerFailure>> {
            let attempt = ctx.attempt;
            let payload: P = match serde_json::from_str(payload) {
                Ok(p) => p,
                Err(e) => {
                    let failure = HandlerFailure {
                        class: ErrorClass::new(
                            ErrorKind::NonRetriable,
                            ErrorCode::new("INVALID_PAYLOAD"),
                        ),
                        message: format!("payload does not match the handler's type: {e}"),
                        declined: false,
                    };
                    return Box::pin(async move { Err(failure) });
                }
            };
            let fut = f(ctx, payload);
            let classify = classify.clone();
            let should_retry = should_retry.clone();
            Box::pin(async move {
                fut.await.map_err(|e| {
                    let class = classify
                        .as_ref()
                        .and_then(|c| c(&e))
                        .unwrap_or_else(|| e.classify());
                    let declined = should_retry
                        .as_ref()
                        .is_some_and(|s| !s(&e, &class, attempt));
                    HandlerFailure {
                        class,
                        message: e.to_string(),
                        declined,
                    }
                })
            })
        };
        Registered {
            name,
            retry,
            dependency,
            limit_key,
            priority,
            run: Arc::new(run),
        }
    }
}

impl<P, E, F, Fut> From<Handler<P, E, F>> for Registered
where
    P: DeserializeOwned + Send + 'static,
    E: Classify + Display + Send + 'static,
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    fn from(h: Handler<P, E, F>) -> Self {
        h.erase()
    }
}
