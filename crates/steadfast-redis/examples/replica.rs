//! One replica of a service sharing state through Redis; the cross-process tests run three.
//!
//! ```sh
//! # calls a dependency every 10 ms; `fail` makes every call fail
//! cargo run -p steadfast-redis --example replica -- breaker redis://127.0.0.1:6379 demo r1 1 fail 3000
//! # 34 concurrent duplicates of one side effect
//! cargo run -p steadfast-redis --example replica -- once redis://127.0.0.1:6379 demo r1 34
//! ```
//!
//! Output, one event a line: `ready`, `opened UNIX_MS`, `rejected UNIX_MS`, `result TEXT`.

#[path = "../tests/support/replica.rs"]
mod replica;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(usage) = replica::run(&args).await {
        eprintln!("{usage}");
        std::process::exit(2);
    }
}
