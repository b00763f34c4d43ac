//! The three tools work together as the benchmark script runs them (tiny counts, real
//! processes, bounded by the driver's own watchdog).

use std::process::Command;

use serde_json::Value;

const DRIVER: &str = env!("CARGO_BIN_EXE_rpc-driver");
const ECHO: &str = env!("CARGO_BIN_EXE_echo-upstream");
const RELAY: &str = env!("CARGO_BIN_EXE_byte-relay");

fn drive(command: &[&str]) -> Value {
    let out = Command::new(DRIVER)
        .args([
            "--warmup",
            "5",
            "--seq",
            "50",
            "--conc",
            "1000",
            "--inflight",
            "8",
            "--deadline",
            "30",
            "--",
        ])
        .args(command)
        .output()
        .expect("the driver runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

#[test]
fn the_driver_measures_direct_and_relayed_echo() {
    for report in [drive(&[ECHO]), drive(&[RELAY, "--", ECHO])] {
        assert_eq!(report["seq_calls"], 50);
        assert_eq!(report["conc_calls"], 1000);
        assert!(report["calls_per_s"].as_f64().unwrap() > 0.0);
        let p50 = report["seq_us_p50"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= report["seq_us_p99"].as_f64().unwrap());
    }
}

#[test]
fn bad_options_are_refused_naming_the_option() {
    let out = Command::new(DRIVER)
        .args(["--inflight", "0", "--", ECHO])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--inflight: must be >= 1"));
    let out = Command::new(DRIVER)
        .args(["--seq", "many", "--", ECHO])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seq: expected a number"));
    let out = Command::new(DRIVER)
        .args(["--modern", "--", ECHO])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--modern: needs --http URL"));
}

#[test]
fn an_upstream_that_dies_is_an_error_not_a_hang() {
    let out = Command::new(DRIVER)
        .args(["--deadline", "30", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rpc-driver:"));
}
