//! The queue of messages toward one peer, bounded where a peer could make it grow.
//!
//! A client that reads slowly while the upstream floods it with log messages must not make the
//! proxy hold every message: notifications beyond a cap are dropped (and counted), while
//! responses — each the answer to a request in flight, so bounded by `max_in_flight` — are
//! never dropped. One FIFO keeps the order the peer must see: a progress notification queued
//! before its result is written before it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

/// Bytes written per batch before the writer lets go of the queue.
const BATCH: usize = 256 * 1024;

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<(Vec<u8>, bool)>,
    notifications: usize,
    closed: bool,
}

/// Why [`Outbound::offer`] did not queue a line.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The queue is closed; the line, to send elsewhere.
    Closed(Vec<u8>),
    /// The queue holds its cap of notifications (counted as dropped).
    Full,
}

/// A bounded outbound queue with one writer.
#[derive(Debug)]
pub(crate) struct Outbound {
    state: Mutex<State>,
    ready: Notify,
    max_notifications: usize,
    dropped: AtomicU64,
}

impl Outbound {
    /// A queue holding at most `max_notifications` notifications at once.
    pub(crate) fn new(max_notifications: usize) -> Self {
        Self {
            state: Mutex::default(),
            ready: Notify::new(),
            max_notifications: max_notifications.max(1),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a response or a request: never dropped while the queue is open.
    pub(crate) fn push(&self, line: Vec<u8>) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        s.queue.push_back((line, false));
        drop(s);
        self.ready.notify_one();
    }

    /// Queues a notification; returns false (and counts it) if the cap is reached.
    pub(crate) fn push_notification(&self, line: Vec<u8>) -> bool {
        let mut s = self.lock();
        if s.closed {
            return false;
        }
        if s.notifications >= self.max_notifications {
            drop(s);
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    cap = self.max_notifications,
                    "the client reads too slowly: dropping notifications (counted in health)"
                );
            }
            return false;
        }
        s.notifications += 1;
        s.queue.push_back((line, true));
        drop(s);
        self.ready.notify_one();
        true
    }

    /// Offers a notification (or a request counted like one) to a queue that may have closed:
    /// the line comes back when it is closed, so the caller can send it elsewhere.
    pub(crate) fn offer(&self, line: Vec<u8>) -> Result<(), Refused> {
        {
            let s = self.lock();
            if s.closed {
                return Err(Refused::Closed(line));
            }
        }
        if self.push_notification(line) {
            Ok(())
        } else {
            // Closed in between (rare) or full: either way the queue will not carry it.
            Err(Refused::Full)
        }
    }

    /// Queues the last message (a request's response) and closes the queue in one step, so a
    /// reader that takes it knows it was the last ([`Outbound::is_finished`]). Gives the line
    /// back if the queue was closed already.
    pub(crate) fn finish(&self, line: Vec<u8>) -> Result<(), Vec<u8>> {
        let mut s = self.lock();
        if s.closed {
            return Err(line);
        }
        s.queue.push_back((line, false));
        s.closed = true;
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// Whether the queue is closed.
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Whether the queue is closed and drained: nothing more will come.
    #[cfg(test)]
    pub(crate) fn is_finished(&self) -> bool {
        let s = self.lock();
        s.closed && s.queue.is_empty()
    }

    /// Counts a notification dropped on the way to this peer elsewhere (a full request
    /// stream), so health reports it with the rest.
    pub(crate) fn count_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The most notifications the queue holds at once.
    pub(crate) fn cap(&self) -> usize {
        self.max_notifications
    }

    /// Notifications dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Messages waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether nothing is waiting.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the writer once the queue is drained; later pushes are ignored.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
    }

    /// The next message (and whether it is a notification), waiting for one; `None` once the
    /// queue is closed and drained. For a front that hands messages on one by one.
    pub(crate) async fn next_message(&self) -> Option<(Vec<u8>, bool)> {
        loop {
            {
                let mut s = self.lock();
                if let Some((line, notification)) = s.queue.pop_front() {
                    if notification {
                        s.notifications -= 1;
                    }
                    return Some((line, notification));
                }
                if s.closed {
                    return None;
                }
            }
            self.ready.notified().await;
        }
    }

    /// Puts a message taken by [`Outbound::next_message`] back at the front (it could not be
    /// delivered), so the next reader gets it first.
    pub(crate) fn unpop(&self, line: Vec<u8>, notification: bool) {
        let mut s = self.lock();
        if notification {
            s.notifications += 1;
        }
        s.queue.push_front((line, notification));
        drop(s);
        self.ready.notify_one();
    }

    /// Writes queued messages to `w` until the queue is closed and drained, or `w` fails.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin>(&self, mut w: W) -> std::io::Result<()> {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            let closed = {
                let mut s = self.lock();
                while batch.len() < BATCH {
                    let Some((line, notification)) = s.queue.pop_front() else {
                        break;
                    };
                    if notification {
                        s.notifications -= 1;
                    }
                    if batch.is_empty() && line.len() >= BATCH {
                        batch = line;
                        break;
                    }
                    batch.extend_from_slice(&line);
                }
                s.closed && s.queue.is_empty()
            };
            if batch.is_empty() {
                if closed {
                    w.flush().await?;
                    return Ok(());
                }
                w.flush().await?;
                self.ready.notified().await;
                continue;
            }
            w.write_all(&batch).await?;
            batch.clear();
            if batch.capacity() > 4 * BATCH {
                let large = batch.capacity() >= super::memory::LARGE;
                batch.shrink_to(BATCH);
                // A large reply is let go here, once written, which may be long after it was
                // read (a slow client): hand its memory back now, not only after the read.
                if large {
                    super::memory::release_soon();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notifications_beyond_the_cap_are_dropped_and_responses_never() {
        let q = Outbound::new(2);
        assert!(q.push_notification(b"n1\n".to_vec()));
        assert!(q.push_notification(b"n2\n".to_vec()));
        assert!(!q.push_notification(b"n3\n".to_vec()));
        q.push(b"r1\n".to_vec());
        q.push(b"r2\n".to_vec());
        assert_eq!(q.dropped(), 1);
        q.close();
        let mut out = Vec::new();
        q.write_to(&mut out).await.unwrap();
        assert_eq!(out, b"n1\nn2\nr1\nr2\n");
    }

    #[tokio::test]
    async fn the_last_message_closes_the_queue_and_later_offers_come_back() {
        let q = Outbound::new(1);
        assert!(q.offer(b"n1\n".to_vec()).is_ok());
        assert!(matches!(q.offer(b"n2\n".to_vec()), Err(Refused::Full)));
        assert!(q.finish(b"r\n".to_vec()).is_ok());
        assert!(q.is_closed() && !q.is_finished());
        assert!(matches!(q.offer(b"n3\n".to_vec()), Err(Refused::Closed(l)) if l == b"n3\n"));
        assert_eq!(q.finish(b"again\n".to_vec()), Err(b"again\n".to_vec()));
        assert_eq!(q.next_message().await.unwrap().0, b"n1\n");
        assert_eq!(q.next_message().await.unwrap().0, b"r\n");
        assert!(q.is_finished());
        assert!(q.next_message().await.is_none());
    }

    #[tokio::test]
    async fn a_message_that_could_not_be_delivered_is_read_again_first() {
        let q = Outbound::new(4);
        q.push(b"a\n".to_vec());
        q.push(b"b\n".to_vec());
        let (first, n) = q.next_message().await.unwrap();
        q.unpop(first, n);
        assert_eq!(q.next_message().await.unwrap().0, b"a\n");
        assert_eq!(q.next_message().await.unwrap().0, b"b\n");
        q.close();
        assert!(q.next_message().await.is_none());
    }
}
