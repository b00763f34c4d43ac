//! Where a server's request goes, and how its entry at the client ends: over an in-memory
//! link (the "child's stdin" is a channel), on tokio's paused clock for the timeout.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::link::Transport;
use super::{Link, LinkState, Settings, Upstream};
use crate::session::client::Client;
use crate::wire::framing::Frame;

const TIMEOUT: Duration = Duration::from_secs(5);

fn upstream() -> (Arc<Upstream>, Arc<Link>, mpsc::Receiver<Vec<u8>>) {
    let settings = Settings {
        request_timeout: TIMEOUT,
        ..Settings::default()
    };
    let up = Upstream::new(
        "test",
        steadfast_mcp::Upstream::command("unused", Vec::<String>::new()),
        settings,
    );
    let (tx, rx) = mpsc::channel(1024);
    let link = Link::new(1, Transport::Stdio(tx));
    up.state.send_replace(LinkState::Up(link.clone()));
    (up, link, rx)
}

fn client(up: &Arc<Upstream>) -> Arc<Client> {
    client_with_queue(up, 1024)
}

fn client_with_queue(up: &Arc<Upstream>, max_notifications: usize) -> Arc<Client> {
    let c = Client::new(max_notifications);
    let mut clients = up.clients.write().unwrap();
    let d: Arc<dyn super::Downstream> = c.clone();
    clients.push(Arc::downgrade(&d));
    c
}

/// A request from the server, as the stdio reader or the HTTP stream hands it over.
fn server_asks(up: &Arc<Upstream>, link: &Arc<Link>, id: &str, related: Option<u64>) {
    let line = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"roots/list","params":{{}}}}"#);
    up.on_frame_related(link, Frame::Line(line.as_bytes().into()), related);
}

/// What is queued for a client now, parsed.
fn queued(c: &Client) -> Vec<Value> {
    let mut out = Vec::new();
    while !c.out.is_empty() {
        let Some(Some((line, _))) = c.out.next_message().now_or_never() else {
            break;
        };
        out.push(serde_json::from_slice(&line).unwrap());
    }
    out
}

/// What the proxy wrote to the server, parsed (the client's answers among it).
fn sent(rx: &mut mpsc::Receiver<Vec<u8>>) -> Vec<Value> {
    let mut out = Vec::new();
    while let Ok(line) = rx.try_recv() {
        out.push(serde_json::from_slice(&line).unwrap());
    }
    out
}

fn answers(sent: &[Value]) -> Vec<&Value> {
    sent.iter().filter(|m| m.get("method").is_none()).collect()
}

trait NowOrNever: std::future::Future + Sized {
    fn now_or_never(self) -> Option<Self::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = std::pin::pin!(self);
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
impl<F: std::future::Future> NowOrNever for F {}

#[tokio::test]
async fn a_related_request_goes_to_its_session_even_when_another_is_newer() {
    let (up, link, _rx) = upstream();
    let (a, b) = (client(&up), client(&up));
    let (ga, _ra) = up.call_from(&link, "tools/call", None, None, Some(&*a));
    let (_gb, _rb) = up.call_from(&link, "tools/call", None, None, Some(&*b));
    server_asks(&up, &link, "s1", Some(ga.id()));
    let to_a = queued(&a);
    assert_eq!(to_a.len(), 1, "{to_a:?}");
    assert_eq!(to_a[0]["method"], "roots/list");
    assert!(queued(&b).is_empty());
}

#[tokio::test]
async fn an_unrelated_request_goes_to_the_newest_call_then_to_the_last_active_session() {
    let (up, link, mut rx) = upstream();
    let (a, b) = (client(&up), client(&up));
    {
        let (_ga, _ra) = up.call_from(&link, "tools/call", None, None, Some(&*a));
        let (_gb, _rb) = up.call_from(&link, "tools/call", None, None, Some(&*b));
        server_asks(&up, &link, "s1", None);
        assert_eq!(queued(&b).len(), 1, "the newest call's session");
        assert!(queued(&a).is_empty());
    }
    // Nothing in flight now: the session that sent the last request.
    let (ga, _ra) = up.call_from(&link, "ping", None, None, Some(&*a));
    drop(ga);
    sent(&mut rx);
    server_asks(&up, &link, "s2", None);
    assert_eq!(queued(&a).len(), 1, "the most recently active session");
    assert!(queued(&b).is_empty());
}

/// A request from the server with `method`, as the stdio reader or the HTTP stream hands it.
fn server_sends(
    up: &Arc<Upstream>,
    link: &Arc<Link>,
    id: &str,
    method: &str,
    related: Option<u64>,
) {
    let line = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"{method}","params":{{}}}}"#);
    up.on_frame_related(link, Frame::Line(line.as_bytes().into()), related);
}

// Issue 36 item 13c: a MCP 2026-07-28 client's call in flight is not answered `input_required`
// for a `roots/list` nothing relates to it (server-everything asks one at its start); an
// elicitation guessed the same way, or a `roots/list` the server relates to the call, is put
// to it.
#[tokio::test]
async fn an_unrelated_roots_request_is_put_to_no_modern_call() {
    let (up, link, mut rx) = upstream();
    let m = client(&up);
    m.mark_modern();
    let mut asked = crate::session::input_required::runs::test_run(
        m.runs(),
        &json!({"_meta": {crate::wire::era::CLIENT_CAPABILITIES: {"roots": {}, "elicitation": {}}}}),
    );
    let (gm, _rm) = up.call_from(&link, "tools/call", None, None, Some(&*m));
    sent(&mut rx);

    server_sends(&up, &link, "s1", "roots/list", None);
    assert!(asked().is_empty(), "the call was not asked");
    let refused = sent(&mut rx);
    let refused = answers(&refused);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["id"], "s1");
    assert_eq!(refused[0]["error"]["code"], -32021, "{refused:?}");
    let message = refused[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("relates to no request"), "{message}");

    server_sends(&up, &link, "s2", "elicitation/create", None);
    assert_eq!(asked(), ["elicitation/create"], "guessed: the newest call");
    server_sends(&up, &link, "s3", "roots/list", Some(gm.id()));
    assert_eq!(asked(), ["roots/list"], "related to the call");
    assert!(answers(&sent(&mut rx)).is_empty(), "neither was refused");
}

#[tokio::test]
async fn a_request_related_to_an_ended_session_is_refused_not_misrouted() {
    let (up, link, mut rx) = upstream();
    let a = client(&up);
    let b = client(&up);
    let (ga, _ra) = up.call_from(&link, "tools/call", None, None, Some(&*a));
    drop(a);
    server_asks(&up, &link, "s1", Some(ga.id()));
    assert!(queued(&b).is_empty());
    let answers = sent(&mut rx);
    let answers = self::answers(&answers);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "s1");
    assert!(
        answers[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ended")
    );
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_ends_at_the_timeout_at_both_ends() {
    let (up, link, mut rx) = upstream();
    let a = client(&up);
    server_asks(&up, &link, "s1", None);
    let ours = queued(&a)[0]["id"].clone();
    assert_eq!(a.server_requests_waiting(), 1);
    tokio::time::sleep(TIMEOUT - Duration::from_millis(1)).await;
    assert!(answers(&sent(&mut rx)).is_empty(), "not before the timeout");
    tokio::time::sleep(Duration::from_millis(2)).await;
    let out = sent(&mut rx);
    let answers = self::answers(&out);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32001);
    let told = queued(&a);
    assert_eq!(told[0]["method"], "notifications/cancelled");
    assert_eq!(told[0]["params"]["requestId"], ours);
    assert_eq!(a.server_requests_waiting(), 0);
    // A late answer goes nowhere.
    let raw = serde_json::value::RawValue::from_string("{}".to_owned()).unwrap();
    a.answer_server(&ours.to_string(), Some(&raw), None);
    assert!(self::answers(&sent(&mut rx)).is_empty());
}

#[tokio::test]
async fn cancels_restarts_and_departures_end_the_entries() {
    let (up, link, mut rx) = upstream();
    let a = client(&up);
    // The server cancels: the client hears it under our id; the entry is gone.
    server_asks(&up, &link, "s1", None);
    let ours = queued(&a)[0]["id"].clone();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": "s1", "reason": "no longer needed"}});
    up.on_frame(&link, Frame::Line(cancel.to_string().as_bytes().into()));
    let told = queued(&a);
    assert_eq!(told[0]["params"]["requestId"], ours);
    assert_eq!(told[0]["params"]["reason"], "no longer needed");
    assert_eq!(a.server_requests_waiting(), 0);
    // The connection ends: its requests end too.
    server_asks(&up, &link, "s2", None);
    queued(&a);
    up.fail_generation(link.generation(), false, "the child exited");
    let told = queued(&a);
    assert_eq!(told[0]["method"], "notifications/cancelled");
    assert!(
        told[0]["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("the child exited")
    );
    assert_eq!(a.server_requests_waiting(), 0);
    // The client goes away: the server hears so at once.
    server_asks(&up, &link, "s3", None);
    sent(&mut rx);
    drop(a);
    let out = sent(&mut rx);
    let answers = self::answers(&out);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "s3");
    assert!(answers[0].get("error").is_some());
}

#[tokio::test]
async fn the_table_is_capped() {
    let (up, link, mut rx) = upstream();
    let a = client(&up);
    for i in 0..256 {
        server_asks(&up, &link, &format!("s{i}"), None);
    }
    assert!(answers(&sent(&mut rx)).is_empty());
    server_asks(&up, &link, "one-too-many", None);
    let out = sent(&mut rx);
    let answers = self::answers(&out);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["id"], "one-too-many");
    assert_eq!(answers[0]["error"]["code"], -32003);
    assert_eq!(a.server_requests_waiting(), 256);
}

#[tokio::test]
async fn a_client_that_does_not_read_gets_no_more_than_its_queue_holds() {
    let (up, link, mut rx) = upstream();
    let a = client_with_queue(&up, 2);
    for i in 0..2 {
        server_asks(&up, &link, &format!("s{i}"), None);
    }
    server_asks(&up, &link, "s2", None);
    let out = sent(&mut rx);
    let answers = self::answers(&out);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "s2");
    assert_eq!(answers[0]["error"]["code"], -32003);
    assert_eq!(
        a.server_requests_waiting(),
        2,
        "the refused one left no entry"
    );
    assert_eq!(a.out.len(), 2);
}

/// What is queued on `q` now, parsed.
fn drain(q: &crate::wire::outbound::Outbound) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(Some((line, _))) = q.next_message().now_or_never() {
        out.push(serde_json::from_slice(&line).unwrap());
    }
    out
}

fn from_server(up: &Arc<Upstream>, link: &Arc<Link>, line: &str, related: Option<u64>) {
    up.on_frame_related(link, Frame::Line(line.as_bytes().into()), related);
}

// A request's own stream (an HTTP POST answered as events) carries what the server relates to
// that request: its requests, its logs, a cancel of one of its requests; once the response has
// ended the stream, they go to the session's queue.
#[tokio::test]
async fn related_messages_go_on_the_requests_stream_while_it_is_open() {
    let (up, link, _rx) = upstream();
    let (a, b) = (client(&up), client(&up));
    let stream = Arc::new(crate::wire::outbound::Outbound::new(8));
    let (ga, _ra) = up.call_related(
        &link,
        "tools/call",
        None,
        None,
        Some(&*a),
        Some(stream.clone()),
    );
    let related = Some(ga.id());
    server_asks(&up, &link, "s1", related);
    let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
    from_server(&up, &link, log, related);
    let cancel =
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1"}}"#;
    from_server(&up, &link, cancel, related);
    let on_stream = drain(&stream);
    let methods: Vec<&str> = on_stream
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "roots/list",
            "notifications/message",
            "notifications/cancelled"
        ]
    );
    assert!(queued(&a).is_empty(), "nothing on the session's queue");
    assert!(queued(&b).is_empty(), "a related log is not broadcast");
    // The response ends the stream; what comes after goes to the session's queue.
    let response = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".to_vec();
    assert!(stream.finish(response).is_ok());
    assert_eq!(drain(&stream).len(), 1, "the response, last");
    assert!(stream.is_finished());
    server_asks(&up, &link, "s2", related);
    let to_a = queued(&a);
    assert_eq!(to_a.len(), 1, "{to_a:?}");
    assert_eq!(to_a[0]["id"], "steadfast-2");
}

// A request's stream is capped like the session's queue: a client that does not read it means
// an immediate error to the server, not a message spilled elsewhere.
#[tokio::test]
async fn a_full_request_stream_refuses_the_servers_request_at_once() {
    let (up, link, mut rx) = upstream();
    let a = client(&up);
    let stream = Arc::new(crate::wire::outbound::Outbound::new(1));
    let (ga, _ra) = up.call_related(
        &link,
        "tools/call",
        None,
        None,
        Some(&*a),
        Some(stream.clone()),
    );
    server_asks(&up, &link, "s1", Some(ga.id()));
    server_asks(&up, &link, "s2", Some(ga.id()));
    assert_eq!(stream.len(), 1);
    assert!(queued(&a).is_empty());
    let sent = sent(&mut rx);
    let answers = self::answers(&sent);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "s2");
    assert_eq!(
        answers[0]["error"]["code"],
        crate::wire::jsonrpc::code::OVERLOADED
    );
    assert_eq!(a.server_requests_waiting(), 1);
}
