//! How the process running a durable attempt learns that its task was cancelled somewhere
//! else — through another replica's `tasks/cancel`, or another process on the same store.
//!
//! The cancel is written to the task row first (that is what every replica reads), then
//! announced: on PostgreSQL a `NOTIFY` on [`CANCEL_CHANNEL`] that each replica `LISTEN`s to, so
//! the attempt is dropped within milliseconds (dropping it cancels its upstream request). A
//! notification is lost while a listener reconnects, and SQLite has none, so the attempts
//! running here are also checked against the store every `every` (at most a second): one query
//! for all of them, only while some run.

use std::sync::{Arc, Weak};
use std::time::Duration;

use steadfast::CancellationToken;
use steadfast_jobs::Backend;

use super::Shared;
#[cfg(doc)]
use super::store::CANCEL_CHANNEL;

/// The longest a running attempt goes unchecked when no notification reaches it.
pub(crate) const MAX_CHECK: Duration = Duration::from_secs(1);

/// Starts the watch; it ends with `stop` or when the service is gone.
pub(super) fn spawn(
    shared: &Arc<Shared>,
    url: &str,
    backend: Backend,
    every: Duration,
    stop: &CancellationToken,
) {
    let every = every.clamp(Duration::from_millis(50), MAX_CHECK);
    if backend == Backend::Postgres {
        tokio::spawn(listen(
            Arc::downgrade(shared),
            url.to_owned(),
            every,
            stop.clone(),
        ));
    }
    tokio::spawn(poll(Arc::downgrade(shared), every, stop.clone()));
}

/// Drops the attempts of tasks announced as cancelled; reconnects (after `every`) when the
/// connection is lost, meanwhile `poll` covers.
async fn listen(shared: Weak<Shared>, url: String, every: Duration, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let session = async {
            let mut l = sqlx::postgres::PgListener::connect(&url).await?;
            l.listen(super::store::CANCEL_CHANNEL).await?;
            loop {
                let n = l.recv().await?;
                let Some(s) = shared.upgrade() else {
                    return Ok(());
                };
                if s.cancel_running(n.payload()) {
                    tracing::info!(task = %n.payload(), "[tasks] a task running here was cancelled through another replica; its attempt is dropped");
                }
            }
        };
        tokio::select! {
            r = session => match r {
                Ok(()) => return,
                Err(e) => {
                    let e: sqlx::Error = e;
                    tracing::debug!(error = %steadfast::sanitize(&e.to_string()), "[tasks] the cancel listener lost its connection; polling until it is back");
                }
            },
            _ = stop.cancelled() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Checks the tasks running here against the store every `every`.
async fn poll(shared: Weak<Shared>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        let Some(s) = shared.upgrade() else { return };
        let ids = s.running_ids();
        if ids.is_empty() {
            continue;
        }
        let Some(store) = s.store.get() else { continue };
        match store.ended_among(&ids).await {
            Ok(ended) => {
                for id in ended {
                    if s.cancel_running(&id) {
                        tracing::info!(task = %id, "[tasks] a task running here ended elsewhere (cancelled); its attempt is dropped");
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %steadfast::sanitize(&e.to_string()), "[tasks] checking running tasks failed");
            }
        }
    }
}
