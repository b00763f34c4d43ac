//! The config reader against real files and every kind of mistake.

use super::*;
use steadfast::{BreakerConfigBuilder, BudgetConfigBuilder, RetryPolicyBuilder};

#[test]
fn the_documented_example_is_valid() {
    let doc = include_str!("mod.rs")
        .lines()
        .skip_while(|l| !l.starts_with("//! ```toml"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! ```"))
        .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let c = Config::parse_toml(&doc, "doc").unwrap();
    assert_eq!(c.health_tool.as_deref(), Some("steadfast_health"));
    assert_eq!(
        c.tool("search_web").policy.engine_policy().max_attempts(),
        5
    );
    assert_eq!(c.tool("other").policy.engine_policy().max_attempts(), 3);
    assert_eq!(c.tool("send_email").policy.retry_ambiguous, Some(false));
    assert_eq!(
        c.tool("x").policy.idle_timeout(),
        Some(Duration::from_secs(30))
    );
    assert_eq!(c.tool("x").breaker.unwrap().failure_threshold(), 5);
    assert!(c.budget.is_some());
    assert_eq!(c.tool("db_read").dependency.as_deref(), Some("postgres"));
    assert_eq!(c.tool("search_web").dependency, None);
}

#[test]
fn attempts_time_out_after_a_silent_minute_unless_lifted() {
    let c = Config::parse_toml("", "t.toml").unwrap();
    assert_eq!(c.tool("x").policy.idle_timeout(), Some(PROXY_IDLE_TIMEOUT));
    let c = Config::parse_toml(
        "[tools.long]\nretry = { attempt_timeout = \"none\" }\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(c.tool("long").policy.idle_timeout(), None);
    assert_eq!(
        c.tool("other").policy.idle_timeout(),
        Some(PROXY_IDLE_TIMEOUT)
    );
}

#[test]
fn exact_names_beat_globs_and_specific_globs_beat_general_ones() {
    let c = Config::parse_toml(
        r#"
[tools."*"]
retry = { max_attempts = 2 }
[tools."db_*"]
retry = { max_attempts = 4 }
[tools.db_write]
retry = { max_attempts = 1 }
breaker = false
"#,
        "t.toml",
    )
    .unwrap();
    assert_eq!(c.tool("web").policy.engine_policy().max_attempts(), 2);
    assert_eq!(c.tool("db_read").policy.engine_policy().max_attempts(), 4);
    assert_eq!(c.tool("db_write").policy.engine_policy().max_attempts(), 1);
    assert!(c.tool("db_write").breaker.is_none());
    assert!(c.tool("db_read").breaker.is_some());
}

fn error(text: &str) -> String {
    Config::parse_toml(text, "steadfast.toml")
        .unwrap_err()
        .to_string()
}

#[test]
fn errors_name_file_line_key_and_constraint() {
    assert_eq!(
        error("[defaults]\nretry = { base_delay = \"5s\", max_delay = \"3s\" }\n"),
        "steadfast.toml:2: defaults.retry.base_delay: must be <= max_delay (5s > 3s)"
    );
    assert_eq!(
        error("[upstream]\ncommand = \"x\"\n\n[tools.search]\nretry = { max_attempts = 0 }\n"),
        "steadfast.toml:5: tools.search.retry.max_attempts: must be >= 1 (got 0)"
    );
    assert_eq!(
        error("[tools.\"db_*\".breaker]\nfailure_threshold = 0\n"),
        "steadfast.toml:2: tools.\"db_*\".breaker.failure_threshold: must be >= 1 (got 0)"
    );
    let unknown = error("[defaults]\nretries = 3\n");
    assert!(
        unknown.starts_with("steadfast.toml:2: defaults.retries: unknown field `retries`"),
        "{unknown}"
    );
    let ty = error("[defaults]\nretry_on_is_error = \"sometimes\"\n");
    assert!(
        ty.starts_with("steadfast.toml:2: defaults.retry_on_is_error: unknown variant `sometimes`"),
        "{ty}"
    );
    let bad_duration = error("[defaults]\nattempt_max = \"soon\"\n");
    assert!(
        bad_duration.starts_with("steadfast.toml:2: defaults.attempt_max:"),
        "{bad_duration}"
    );
    assert_eq!(
        error("[upstream]\nargs = [\"x\"]\n"),
        "steadfast.toml:1: upstream.command: missing: give `command` (a child process) or `url`"
    );
    let syntax = error("[defaults\n");
    assert!(syntax.starts_with("steadfast.toml:1:"), "{syntax}");
}

#[test]
fn https_urls_need_the_https_feature() {
    let r = Config::parse_toml(
        "[upstream]\nurl = \"https://mcp.example.com/mcp\"\n",
        "t.toml",
    );
    if cfg!(feature = "https") {
        assert!(r.is_ok());
    } else {
        let e = r.unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml:2: upstream.url: https upstreams need"),
            "{e}"
        );
    }
    let e = Config::parse_toml("[upstream]\nurl = \"ftp://x\"\n", "t.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.toml:2: upstream.url: must start with http:// or https://"
    );
}

#[test]
fn mcp_servers_json_is_accepted() {
    let json = r#"{"mcpServers": {"weather": {"command": "node", "args": ["weather.js"], "env": {"KEY": "v"}},
                       "remote": {"url": "http://localhost:8080/mcp", "headers": {"Authorization": "Bearer x"}}}}"#;
    let c = Config::parse_mcp_servers(json, "claude.json", Some("weather")).unwrap();
    assert_eq!(c.upstream.unwrap().to_string(), "node weather.js");
    let c = Config::parse_mcp_servers(json, "claude.json", Some("remote")).unwrap();
    assert!(matches!(c.upstream, Some(Upstream::Http { .. })));
    // Without --server, every enabled entry, behind one endpoint.
    let c = Config::parse_mcp_servers(json, "claude.json", None).unwrap();
    assert!(c.upstream.is_none());
    let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["remote", "weather"]);
    let e =
        Config::parse_mcp_servers("{\"mcpServers\": {\n\"a\": 3}}", "c.json", None).unwrap_err();
    assert_eq!(e.line, Some(2));
}

#[test]
fn with_defaults_a_silent_tool_is_answered_within_three_minutes() {
    let c = Config::default();
    let p = c.tool("anything").policy;
    let budget = p
        .engine_policy()
        .max_elapsed()
        .expect("a default time budget");
    assert!(budget <= Duration::from_secs(180), "{budget:?}");
    // Each attempt is cut by its idle timeout well before that.
    assert!(p.idle_timeout().unwrap() * 2 < budget);
}

#[test]
fn real_client_files_with_their_own_keys_work() {
    let json = r#"{"mcpServers": {
            "files": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "disabled": false, "autoApprove": [], "timeout": 60},
            "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "y"}},
            "streamy": {"transport": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
            "off": {"command": "nothing", "disabled": true},
            "broken": {"args": "not a list"}
        }}"#;
    let c = Config::parse_mcp_servers(json, "mcp.json", Some("files")).unwrap();
    assert_eq!(
        c.upstream.unwrap().to_string(),
        "npx -y server-filesystem /tmp"
    );
    for name in ["remote", "streamy"] {
        let c = Config::parse_mcp_servers(json, "mcp.json", Some(name)).unwrap();
        assert!(matches!(c.upstream, Some(Upstream::Http { .. })), "{name}");
    }
    let e = Config::parse_mcp_servers(json, "mcp.json", Some("off")).unwrap_err();
    assert!(e.to_string().contains("disabled"), "{e}");
    // A broken entry only fails when it is the one chosen.
    let e = Config::parse_mcp_servers(json, "mcp.json", Some("broken")).unwrap_err();
    assert!(e.to_string().contains("mcpServers.broken"), "{e}");
    // Without --server, disabled entries do not count.
    let one = r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": true}}}"#;
    let c = Config::parse_mcp_servers(one, "mcp.json", None).unwrap();
    assert_eq!(c.upstream.unwrap().to_string(), "x");
}

#[test]
fn an_entry_that_wraps_itself_is_refused() {
    let dir = std::env::temp_dir().join(format!("steadfast-selfwrap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let json = format!(
        r#"{{"mcpServers": {{"me": {{"command": "/usr/local/bin/steadfast", "args": ["proxy", "--config", "{}", "--server", "me"]}},
                "other": {{"command": "steadfast", "args": ["proxy", "--config", "{}", "--server", "real"]}},
                "real": {{"command": "python3", "args": ["s.py"]}}}}}}"#,
        path.display(),
        path.display()
    );
    std::fs::write(&path, &json).unwrap();
    let file = path.display().to_string();
    let e = Config::parse_mcp_servers(&json, &file, Some("me")).unwrap_err();
    assert!(e.to_string().contains("would start itself"), "{e}");
    // Wrapping another entry of the same file is a chain, not a loop.
    assert!(Config::parse_mcp_servers(&json, &file, Some("other")).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_validation_error_is_reported_and_durations_say_their_form() {
    let text = "[defaults]\nretry = { max_attempts = 0 }\n[tools.x]\nretry = { base_delay = \"5s\", max_delay = \"3s\" }\n[proxy]\nmax_in_flight = 0\n";
    let errors = Config::parse_toml_all(text, "t.toml").unwrap_err();
    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(
        all[0].starts_with("t.toml:2: defaults.retry.max_attempts"),
        "{}",
        all[0]
    );
    assert!(
        all[1].contains("tools.x.retry") && all[1].contains("5s > 3s"),
        "{}",
        all[1]
    );
    assert!(all[2].contains("proxy.max_in_flight"), "{}", all[2]);
    for bad in ["\"-5s\"", "\"250\""] {
        let e = Config::parse_toml(&format!("[proxy]\nreconnect_wait = {bad}\n"), "t.toml")
            .unwrap_err();
        assert!(e.to_string().contains("\"250ms\""), "{e}");
    }
}

#[test]
fn different_breakers_for_one_dependency_are_an_error_naming_both_tables() {
    let text = "[tools.a]\ndependency = \"db\"\nbreaker = { failure_threshold = 3 }\n\
                [tools.b]\ndependency = \"db\"\nbreaker = { failure_threshold = 9 }\n";
    let errors = Config::parse_toml_all(text, "t.toml").unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].to_string();
    assert!(e.starts_with("t.toml:6: tools.b.breaker: "), "{e}");
    assert!(
        e.contains("tools.a and tools.b") && e.contains("`db`"),
        "{e}"
    );
    // The same breaker twice (or written once) is one configuration: no conflict.
    let same = "[tools.a]\ndependency = \"db\"\nbreaker = { failure_threshold = 3 }\n\
                [tools.b]\ndependency = \"db\"\nbreaker = { failure_threshold = 3 }\n\
                [tools.c]\ndependency = \"db\"\n";
    let c = Config::parse_toml(same, "t.toml").unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    // Across an upstream's own tool tables too.
    let named = "[upstreams.x]\ncommand = \"x\"\n[upstreams.x.tools.a]\ndependency = \"db\"\n\
                 breaker = false\n[tools.y_b]\ndependency = \"db\"\nbreaker = true\n";
    let e = Config::parse_toml(named, "t.toml").unwrap_err().to_string();
    assert!(
        e.contains("upstreams.x.tools.a") && e.contains("tools.y_b"),
        "{e}"
    );
}

/// The field names a serde struct asks for, read by a deserializer that only listens.
fn field_names<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
    use serde::de::{Error as _, Visitor};
    struct Listen<'a>(&'a mut Vec<&'static str>);
    impl<'de> serde::Deserializer<'de> for Listen<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("listening"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.extend_from_slice(fields);
            Err(Self::Error::custom("listening"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
            enum identifier ignored_any
        }
    }
    let mut names = Vec::new();
    let _ = T::deserialize(Listen(&mut names));
    names
}

#[test]
fn every_config_key_is_documented() {
    let doc = include_str!("../../../../docs/config.md");
    let mut keys = Vec::new();
    keys.extend(field_names::<RawConfig>());
    keys.extend(field_names::<RawUpstream>());
    keys.extend(field_names::<RawNamedUpstream>());
    keys.extend(field_names::<RawProxy>());
    keys.extend(field_names::<ToolSettings>());
    keys.extend(field_names::<RetryPolicyBuilder>());
    keys.extend(field_names::<BreakerConfigBuilder>());
    keys.extend(field_names::<BudgetConfigBuilder>());
    keys.extend(field_names::<CallLimits>());
    keys.extend(field_names::<Cap>());
    keys.extend(field_names::<super::tasks::RawTasks>());
    keys.extend(field_names::<super::auth::RawAuth>());
    keys.extend(field_names::<super::auth::RawIntrospection>());
    keys.extend(field_names::<super::auth::AccessRule>());
    keys.extend(field_names::<super::auth::RawUpstreamOAuth>());
    keys.extend(field_names::<super::telemetry::RawTelemetry>());
    #[cfg(feature = "redis")]
    keys.extend(field_names::<steadfast_redis::StateConfig>());
    assert!(keys.len() > 40, "introspection found only {keys:?}");
    let missing: Vec<_> = keys
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!("[{k}]")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/config.md does not document {missing:?}"
    );
    // And its complete example is a valid config.
    let example = doc
        .split("```toml")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/config.md has a TOML example");
    Config::parse_toml(example, "docs/config.md").unwrap();
}

const TWO: &str =
    "[upstreams.github]\ncommand = \"gh-mcp\"\n\n[upstreams.files]\ncommand = \"fs-mcp\"\n";

#[test]
fn several_upstreams_are_named_and_their_tool_settings_namespaced() {
    let c = Config::parse_toml(
            &format!(
                "{TWO}\n[upstreams.github.tools.create_issue]\nretry = {{ max_attempts = 7 }}\n\
                 [upstreams.files.tools.\"read_*\"]\nretry = {{ max_attempts = 2 }}\n\
                 [upstreams.files.budget]\nretry_ratio = 0.5\n\n[upstreams.off]\ncommand = \"x\"\ndisabled = true\n"
            ),
            "gw.toml",
        )
        .unwrap();
    assert!(c.upstream.is_none());
    let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["files", "github"]);
    assert_eq!(c.separator, "_");
    let max = |tool: &str| c.tool(tool).policy.engine_policy().max_attempts();
    assert_eq!(max("github_create_issue"), 7);
    assert_eq!(max("files_read_text"), 2);
    assert_eq!(max("files_write"), 3);
    assert!(c.upstreams[0].budget.is_some());
    assert!(c.upstreams[1].budget.is_none());
}

#[test]
fn ambiguous_or_mixed_upstreams_are_refused_where_they_are() {
    let e = error("[upstreams.a]\ncommand = \"x\"\n\n[upstreams.a_b]\ncommand = \"y\"\n");
    assert!(e.starts_with("steadfast.toml:4: upstreams.a_b:"), "{e}");
    assert!(e.contains("could belong to either"), "{e}");
    // A longer separator resolves it.
    Config::parse_toml(
            "[proxy]\nseparator = \"__\"\n[upstreams.a]\ncommand = \"x\"\n[upstreams.a_b]\ncommand = \"y\"\n",
            "t.toml",
        )
        .unwrap();
    let e = error("[upstream]\ncommand = \"x\"\n\n[upstreams.b]\ncommand = \"y\"\n");
    assert!(e.starts_with("steadfast.toml:1: upstream:"), "{e}");
    assert!(e.contains("not both"), "{e}");
    let e = error("[proxy]\nseparator = \".\"\n");
    assert!(e.starts_with("steadfast.toml:2: proxy.separator:"), "{e}");
    let e = error("[upstreams.b]\nurl = \"ftp://x\"\n");
    assert!(e.starts_with("steadfast.toml:2: upstreams.b.url:"), "{e}");
    let e = error("[upstreams.b]\ncommand = \"y\"\nbudget = { retry_ratio = -1.0 }\n");
    assert!(e.contains("upstreams.b.budget.retry_ratio"), "{e}");
    let e = error("[proxy]\nlist_timeout = \"0s\"\n");
    assert!(
        e.contains("proxy.list_timeout: must be longer than 0s"),
        "{e}"
    );
}
