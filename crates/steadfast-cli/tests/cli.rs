//! The binary's other commands: check-config, simulate and demo.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_steadfast");

fn temp(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("steadfast-cli-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn check_config_reports_file_line_key_and_constraint() {
    let bad = temp(
        "bad.toml",
        "[upstream]\ncommand = \"x\"\n\n[tools.search]\nretry = { base_delay = \"5s\", max_delay = \"1s\" }\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:5: tools.search.retry.base_delay: must be <= max_delay (5s > 1s)",
            bad.display()
        )),
        "{err}"
    );
    let good = temp(
        "good.toml",
        "[upstream]\ncommand = \"python3\"\nargs = [\"s.py\"]\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (upstream: python3 s.py)"));
    let _ = std::fs::remove_file(bad);
    let _ = std::fs::remove_file(good);
}

#[test]
fn proxy_without_an_upstream_says_how_to_give_one() {
    let out = Command::new(BIN).arg("proxy").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no upstream"));
}

#[test]
fn simulate_contention_prints_json_and_draws_a_plot() {
    let plot = std::env::temp_dir().join(format!("steadfast-cli-{}-c.svg", std::process::id()));
    let out = Command::new(BIN)
        .args([
            "simulate",
            "contention",
            "--model",
            "slots",
            "--runs",
            "1",
            "--clients",
            "1,20",
            "--json",
            "--plot",
        ])
        .arg(&plot)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 8, "4 strategies × 2 sizes");
    let lockstep = rows
        .iter()
        .find(|r| r["strategy"] == "exponential" && r["clients"] == 20)
        .unwrap();
    assert_eq!(lockstep["calls"].as_f64(), Some(210.0));
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("full jitter") && svg.contains("Slots model"),
        "{}",
        &svg[..100.min(svg.len())]
    );
    let _ = std::fs::remove_file(&plot);

    // The default is AWS's model: five strategies, including no backoff.
    let out = Command::new(BIN)
        .args([
            "simulate",
            "contention",
            "--runs",
            "2",
            "--clients",
            "10",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r["model"] == "aws" && r["runs"] == 2));
    assert!(rows.iter().any(|r| r["strategy"] == "no-backoff"));
}

#[test]
fn simulate_overload_with_a_config_uses_its_policy() {
    let cfg = temp(
        "sim.toml",
        "[defaults]\nretry = { max_attempts = 2 }\nbreaker = false\n",
    );
    let out = Command::new(BIN)
        .args([
            "simulate",
            "overload",
            "--failure-rates",
            "1",
            "--duration",
            "5s",
            "--json",
            "--config",
        ])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let retries = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["guard"] == "retries")
        .unwrap();
    assert_eq!(retries["offered"], 500);
    assert_eq!(
        retries["dependency_calls"], 1000,
        "max_attempts = 2 from the config"
    );
    assert_eq!(retries["goodput"].as_f64(), Some(0.0), "a full outage");
    let bad = Command::new(BIN)
        .args(["simulate", "overload", "--failure-rates", "1.5"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("between 0 and 1"));
    let _ = std::fs::remove_file(cfg);
}

#[test]
fn check_config_refuses_two_breakers_for_one_dependency_naming_both() {
    let file = temp(
        "breakers.toml",
        "[upstream]\ncommand = \"x\"\n\n[tools.db_read]\ndependency = \"pg\"\n\
         breaker = { failure_threshold = 3 }\n\n[tools.db_write]\ndependency = \"pg\"\n\
         breaker = { failure_threshold = 9 }\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Before: accepted, with a warning that the first tool called decides.
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}:10: tools.db_write.breaker: ", file.display()))
            && err.contains("tools.db_read and tools.db_write")
            && err.contains("`pg`"),
        "{err}"
    );
    let _ = std::fs::remove_file(file);
}

#[test]
fn the_demos_table_counts_failures_by_what_the_model_was_told() {
    let out = Command::new(BIN).arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // The README's summary rows.
    for row in [
        "calls in",
        "succeeded",
        "of which after retries (failures absorbed)",
        "business failures passed to the model (sanitized)",
        "permanent failures returned as LLM errors",
        "requests refused as invalid (JSON-RPC errors)",
        "retries made",
        "breaker trips",
        "upstream restarts",
        "progress notifications relayed",
    ] {
        assert!(text.contains(row), "{row}: {text}");
    }
    // The crash: the tool is not marked read-only or idempotent, so the model is told
    // OUTCOME_UNKNOWN, and so is the table. Before: SERVICE_UNAVAILABLE in the table.
    let row = |tool: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{tool} ")))
            .unwrap_or_else(|| panic!("no {tool} row: {text}"))
            .to_owned()
    };
    let told = text
        .lines()
        .find(|l| l.trim_start().starts_with("crash: "))
        .unwrap_or_else(|| panic!("what the model saw for crash: {text}"));
    assert!(told.contains("\"code\":\"OUTCOME_UNKNOWN\""), "{told}");
    assert!(row("crash").ends_with("{\"OUTCOME_UNKNOWN\":1}"), "{text}");
    // An invalid request keeps its class (issue 36 item 14): a JSON-RPC error with the
    // upstream's code, counted as such.
    assert!(row("strict").ends_with("{\"JSON-RPC -32602\":4}"), "{text}");
}
