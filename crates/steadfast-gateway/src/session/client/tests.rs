//! The client's own rules for what reaches it: logs by the levels its modern requests asked
//! for, the era its connection opened with, the progress of a call answered `input_required`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Client, Era, Moved};
use crate::upstream::Downstream;
use crate::wire::jsonrpc;

fn log(level: &str) -> Vec<u8> {
    let params = json!({"level": level, "logger": "t", "data": "x"}).to_string();
    jsonrpc::notification("notifications/message", Some(&params))
}

fn progress(token: Value, n: u32) -> Vec<u8> {
    let params = json!({"progressToken": token, "progress": n}).to_string();
    jsonrpc::notification("notifications/progress", Some(&params))
}

#[test]
fn a_modern_client_gets_logs_only_at_levels_a_request_in_flight_asked_for() {
    let c = Client::new(16);
    c.mark_modern();
    assert!(c.push_notification(log("error")), "dropped as delivered");
    assert_eq!(c.out.len(), 0, "no request asked for logs");
    let info = c.log_scope(crate::wire::era::log_rank("info"));
    c.push_notification(log("debug"));
    assert_eq!(c.out.len(), 0, "debug is below info");
    c.push_notification(log("warning"));
    c.push_related(None, log("info"));
    assert_eq!(c.out.len(), 2, "info and above, related or not");
    c.push_notification(log("no-such-level"));
    assert_eq!(c.out.len(), 2, "not a level: nobody asked for it");
    drop(info);
    c.push_notification(log("emergency"));
    assert_eq!(c.out.len(), 2, "the request that asked has ended");
    assert!(c.log_scope(None).is_none(), "no level, no scope");
}

#[test]
fn a_handshake_client_gets_every_log_and_the_rest_passes() {
    let c = Client::new(16);
    c.push_notification(log("debug"));
    assert_eq!(c.out.len(), 1);
    let m = Client::new(16);
    m.mark_modern();
    // A line that mentions the method without being a log.
    let params = json!({"data": "\"notifications/message\""}).to_string();
    m.push_related(
        None,
        jsonrpc::notification("notifications/progress", Some(&params)),
    );
    assert_eq!(m.out.len(), 1);
}

#[test]
fn the_era_is_locked_by_the_first_request_accepted() {
    let c = Client::new(4);
    assert_eq!(c.era(), Era::Open);
    assert_eq!(c.lock_era(Era::Modern), Era::Modern);
    assert_eq!(c.lock_era(Era::Handshake), Era::Modern, "decided once");
    assert_eq!(c.era(), Era::Modern);
}

#[tokio::test]
async fn a_parked_calls_progress_is_dropped_then_goes_to_the_retry_with_its_token() {
    let first = Client::new(16);
    first.push_related(None, progress(json!("p1"), 1));
    assert_eq!(first.out.len(), 1, "not moved: delivered as it is");
    first.move_progress("\"p1\"", Moved::Parked);
    first.push_related(None, progress(json!("p1"), 2));
    assert_eq!(first.out.len(), 1, "parked: its request is answered");
    let retry = Client::new(16);
    first.move_progress(
        "\"p1\"",
        Moved::To {
            token: json!(7),
            client: Arc::downgrade(&retry),
            stream: None,
        },
    );
    first.push_related(None, progress(json!("p1"), 3));
    assert_eq!(first.out.len(), 1);
    assert_eq!(retry.out.len(), 1, "on the retry's client");
    let (line, _) = retry.out.next_message().await.unwrap();
    let moved: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(moved["params"]["progressToken"], 7, "the retry's token");
    assert_eq!(moved["params"]["progress"], 3);
    assert!(line.ends_with(b"\n"), "one line");
    // Another call's progress is not moved.
    first.push_related(None, progress(json!("p2"), 1));
    assert_eq!(first.out.len(), 2);
    first.end_moved_progress("\"p1\"");
    first.push_related(None, progress(json!("p1"), 4));
    assert_eq!(first.out.len(), 3, "the call ended: nothing moved any more");
}
