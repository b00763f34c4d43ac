//! A flaky "tool" behind Steadfast: transient failures are retried with backoff, a rate limit
//! waits for its Retry-After, and a bad request is handed back at once with the reason.
//!
//! Run it with `cargo run -p steadfast --example flaky_tool`.

use std::time::Duration;

use steadfast::{ErrorClass, Jitter, Retry, RetryPolicy};

/// Stands in for an HTTP API: the outcome of each attempt is scripted.
async fn call_api(script: &[u16], attempt: u32) -> Result<String, ErrorClass> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    match script.get(attempt as usize - 1).copied().unwrap_or(200) {
        200 => Ok(format!("42 results (attempt {attempt})")),
        429 => Err(ErrorClass::from_response(429, Some("1"))),
        status => Err(ErrorClass::from_status(status)),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .base_delay(Duration::from_millis(100))
        .max_delay(Duration::from_secs(2))
        .jitter(Jitter::Equal)
        .max_elapsed(Duration::from_secs(10))
        .build()?;

    let retry = Retry::new(policy)
        .name("search")
        .on_retry(|ev| {
            println!(
                "  attempt {} failed: {}; retrying in {} ms",
                ev.attempt,
                ev.class,
                ev.delay.as_millis()
            )
        })
        .on_success(|ev| {
            println!(
                "  succeeded after {} attempt(s) in {:?}",
                ev.attempts, ev.elapsed
            )
        })
        .on_give_up(|ev| println!("  gave up after {} attempt(s): {}", ev.attempts, ev.reason));

    for (name, script) in [
        ("two 503s, then success", &[503, 503][..]),
        ("rate limited with Retry-After: 1", &[429][..]),
        ("a 404 is not retried", &[404][..]),
        ("an outage outlasts the attempts", &[503, 502, 503, 504][..]),
    ] {
        println!("{name}:");
        match retry
            .run(async |attempt| call_api(script, attempt).await)
            .await
        {
            Ok(value) => println!("  -> {value}"),
            Err(err) => println!("  -> error: {err}"),
        }
    }
    Ok(())
}
