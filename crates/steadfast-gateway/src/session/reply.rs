//! Where a request's answer goes: the value a front hands the session with the request, moved
//! into the task that serves it and consumed by its answer.
//!
//! A front that answers each request on its own (an HTTP POST) used to register a waiter under
//! the request's id in a map on the client, and the session's answer was looked up there by id
//! on its way out. Now the answer's way travels with the request: the session returns the
//! answer to its `Reply`, and the front awaits the receiving end it kept. Nothing is keyed by
//! id, nothing can be found by another request that reused the id, and a request whose task
//! ends without answering (cancelled, its session ended) drops its `Reply`, which the front
//! hears at once (its receiver errs, or its stream closes).

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::session::client::Client;
use crate::wire::outbound::Outbound;

/// Where the answer to one request goes.
#[derive(Debug)]
pub(crate) struct Reply {
    to: To,
}

#[derive(Debug)]
enum To {
    /// In order with everything else on the client's queue (the stdio front).
    Queue,
    /// To the front awaiting it alone (an HTTP POST answered with JSON).
    Once(Option<oneshot::Sender<Vec<u8>>>),
    /// As the last message of the request's own stream (an HTTP POST answered with server-sent
    /// events): what relates to the request goes there first.
    Stream(Arc<Outbound>, bool),
}

impl Reply {
    /// On the client's queue, with its notifications (the stdio front).
    pub(crate) fn queue() -> Self {
        Self { to: To::Queue }
    }

    /// To the returned receiver alone; it errs if the request ends unanswered.
    pub(crate) fn once() -> (Self, oneshot::Receiver<Vec<u8>>) {
        let (tx, rx) = oneshot::channel();
        let reply = Self {
            to: To::Once(Some(tx)),
        };
        (reply, rx)
    }

    /// As the last message of a new stream of the request, which carries its related messages
    /// first (capped at `max_notifications`, like the client's queue); the stream closes
    /// without it if the request ends unanswered.
    pub(crate) fn stream(max_notifications: usize) -> (Self, Arc<Outbound>) {
        let stream = Arc::new(Outbound::new(max_notifications));
        let reply = Self {
            to: To::Stream(stream.clone(), false),
        };
        (reply, stream)
    }

    /// The request's own stream, if its answer goes on one.
    pub(crate) fn request_stream(&self) -> Option<&Arc<Outbound>> {
        match &self.to {
            To::Stream(s, _) => Some(s),
            _ => None,
        }
    }

    /// Delivers the answer. A front that stopped waiting (its receiver dropped, its stream
    /// closed) leaves it to the client's queue, where a session's client may still read it.
    pub(crate) fn answer(self, client: &Client, line: Vec<u8>) {
        if let Err(line) = self.deliver(line) {
            client.out.push(line);
        }
    }

    /// Like [`Reply::answer`], for answers a peer can provoke without limit (to malformed
    /// messages, pings, refusals): on the queue they count against the notification cap, so a
    /// client that floods junk and does not read cannot grow the proxy's memory.
    pub(crate) fn answer_capped(self, client: &Client, line: Vec<u8>) {
        if let Err(line) = self.deliver(line) {
            client.out.push_notification(line);
        }
    }

    /// Hands `line` to the front, or gives it back for the queue.
    fn deliver(mut self, line: Vec<u8>) -> Result<(), Vec<u8>> {
        match &mut self.to {
            To::Queue => Err(line),
            To::Once(tx) => match tx.take() {
                Some(tx) => tx.send(line),
                None => Err(line),
            },
            To::Stream(s, done) => {
                *done = true;
                s.finish(line)
            }
        }
    }
}

impl Drop for Reply {
    /// Unanswered: a stream of the request ends, so the front stops waiting. (A `Once` sender
    /// dropped does the same for its receiver.)
    fn drop(&mut self) {
        if let To::Stream(s, false) = &self.to {
            s.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn once_reaches_its_receiver_and_a_dropped_reply_tells_it() {
        let client = Client::new(4);
        let (reply, rx) = Reply::once();
        reply.answer(&client, b"a".to_vec());
        assert_eq!(rx.now_or_never().unwrap().unwrap(), b"a");
        let (reply, rx) = Reply::once();
        drop(reply);
        assert!(
            rx.now_or_never().unwrap().is_err(),
            "the front stops waiting"
        );
        assert!(client.out.next_message().now_or_never().is_none());
    }

    #[test]
    fn a_front_gone_leaves_the_answer_to_the_clients_queue() {
        let client = Client::new(4);
        let (reply, rx) = Reply::once();
        drop(rx);
        reply.answer(&client, b"late".to_vec());
        let (line, notification) = client.out.next_message().now_or_never().unwrap().unwrap();
        assert_eq!((line.as_slice(), notification), (&b"late"[..], false));
    }

    #[test]
    fn a_stream_ends_with_the_answer_or_closes_without_it() {
        let client = Client::new(4);
        let (reply, stream) = Reply::stream(4);
        assert!(reply.request_stream().is_some());
        stream.push_notification(b"progress".to_vec());
        reply.answer(&client, b"answer".to_vec());
        let first = stream.next_message().now_or_never().unwrap().unwrap();
        assert_eq!(first, (b"progress".to_vec(), true));
        let last = stream.next_message().now_or_never().unwrap().unwrap();
        assert_eq!(last, (b"answer".to_vec(), false));
        assert!(stream.is_finished());
        let (reply, stream) = Reply::stream(4);
        drop(reply);
        assert!(stream.is_finished(), "closed: the front stops waiting");
    }

    #[test]
    fn queue_answers_are_in_order_and_capped_ones_count_as_notifications() {
        let client = Client::new(1);
        Reply::queue().answer_capped(&client, b"1".to_vec());
        Reply::queue().answer_capped(&client, b"dropped".to_vec());
        Reply::queue().answer(&client, b"2".to_vec());
        let got: Vec<_> = std::iter::from_fn(|| client.out.next_message().now_or_never()?)
            .map(|(l, _)| l)
            .take(3)
            .collect();
        assert_eq!(got, [b"1".to_vec(), b"2".to_vec()]);
    }
}
