//! The retry layer.

use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::tower::{Layer, Service};

use crate::{Classify, Retry, RetryError};

/// Retries calls to the inner service under a [`Retry`]: its policy, classifier, `check` on
/// responses, hooks, breaker, budget and metrics all apply. Requests must be `Clone`, since
/// each attempt sends a copy; the inner service is cloned per call, as tower's own retry does.
///
/// See the [module docs](crate::tower) for an example.
pub struct RetryLayer<Res, E> {
    retry: Arc<Retry<Res, E>>,
}

impl<Res, E> RetryLayer<Res, E> {
    /// A layer running every call through `retry`.
    ///
    /// See the [module docs](crate::tower) for an example.
    pub fn new(retry: Retry<Res, E>) -> Self {
        Self {
            retry: Arc::new(retry),
        }
    }
}

impl<Res, E> Clone for RetryLayer<Res, E> {
    fn clone(&self) -> Self {
        Self {
            retry: self.retry.clone(),
        }
    }
}

impl<Res, E> fmt::Debug for RetryLayer<Res, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("retry", &self.retry)
            .finish()
    }
}

impl<S, Res, E> Layer<S> for RetryLayer<Res, E> {
    type Service = RetryService<S, Res, E>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            retry: self.retry.clone(),
        }
    }
}

/// The service produced by [`RetryLayer`].
pub struct RetryService<S, Res, E> {
    inner: S,
    retry: Arc<Retry<Res, E>>,
}

impl<S: Clone, Res, E> Clone for RetryService<S, Res, E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            retry: self.retry.clone(),
        }
    }
}

impl<S: fmt::Debug, Res, E> fmt::Debug for RetryService<S, Res, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("retry", &self.retry)
            .finish()
    }
}

impl<S, Req> Service<Req> for RetryService<S, S::Response, S::Error>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Classify + Send + 'static,
    Req: Clone + Send + 'static,
{
    type Response = S::Response;
    type Error = RetryError<S::Error>;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Self::Error>> + Send>>;

    /// Always ready: readiness is awaited per attempt, on the clone that makes it, so a
    /// service that is not ready yet (a reconnecting client) delays the attempt rather than
    /// failing the call.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let retry = self.retry.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            retry
                .run(move |_| {
                    let mut svc = inner.clone();
                    let req = req.clone();
                    async move {
                        poll_fn(|cx| svc.poll_ready(cx)).await?;
                        svc.call(req).await
                    }
                })
                .await
        })
    }
}
