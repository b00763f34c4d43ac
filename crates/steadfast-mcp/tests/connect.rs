//! Connecting: which failures are retried.

use std::time::Duration;

use steadfast::{GiveUpReason, RetryPolicy};
use steadfast_mcp::{ConnectError, Reconnecting, Upstream, connect};

fn quick() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .base_delay(Duration::from_millis(1))
        .max_delay(Duration::from_millis(5))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_missing_program_is_not_retried() {
    let up = Upstream::command("/nonexistent/steadfast-test-server", Vec::<String>::new());
    let err = connect(&up, &quick(), || ()).await.unwrap_err();
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.reason(), GiveUpReason::NonRetriable);
    assert!(
        matches!(err.error(), Some(ConnectError::Spawn { .. })),
        "{err}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_server_that_exits_before_the_handshake_is_retried() {
    let up = Upstream::command("sh", ["-c", "exit 1"]);
    let err = connect(&up, &quick(), || ()).await.unwrap_err();
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.reason(), GiveUpReason::Exhausted);
    assert!(
        matches!(err.error(), Some(ConnectError::Initialize(_))),
        "{err}"
    );

    let err = Reconnecting::builder(up, || ())
        .connect_policy(quick())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.attempts(), 3);
}

#[test]
fn http_urls_are_shown_without_credentials() {
    let up = Upstream::Http {
        url: "https://user:hunter2@mcp.example.com/mcp".into(),
        headers: Default::default(),
    };
    assert!(!up.to_string().contains("hunter2"), "{up}");
}

#[test]
fn commands_are_shown_without_credentials() {
    let up = Upstream::command(
        "node",
        ["server.js", "--api_key=sk-live-abcdefghijklmnopqrstuvwx"],
    );
    let shown = up.to_string();
    assert!(shown.starts_with("node server.js"), "{shown}");
    assert!(!shown.contains("sk-live"), "{shown}");
}
