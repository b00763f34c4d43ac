//! `[tasks]`: where durable tool calls are kept, for how long, and how often they are polled.

use std::time::Duration;

use serde::Deserialize;

/// `[tasks]` as written in the file (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTasks {
    /// `sqlite://path` or `postgres://…`.
    pub store: Option<String>,
    /// How long a task and its result are kept after it was created.
    #[serde(default, with = "humantime_serde")]
    pub result_ttl: Option<Duration>,
    /// The poll interval suggested to clients; also the job worker's idle poll.
    #[serde(default, with = "humantime_serde")]
    pub poll_interval: Option<Duration>,
    /// How long a worker's claim on a call holds without renewal; after a crash, a call in
    /// flight is looked at again (and found "sent") once it runs out.
    #[serde(default, with = "humantime_serde")]
    pub lease: Option<Duration>,
    /// Durable calls run at once.
    pub concurrency: Option<usize>,
    /// Tasks not yet finished, across clients; more are refused at once.
    pub max_active: Option<u64>,
}

/// `[tasks]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasksConfig {
    /// The store's URL.
    pub store: String,
    /// The longest a task is kept (a client may ask for less).
    pub result_ttl: Duration,
    /// The suggested poll interval.
    pub poll_interval: Duration,
    /// The worker's lease.
    pub lease: Duration,
    /// Durable calls run at once.
    pub concurrency: usize,
    /// Unfinished tasks allowed.
    pub max_active: u64,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            store: "sqlite://steadfast-tasks.db".to_owned(),
            result_ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            lease: Duration::from_secs(30),
            concurrency: 16,
            max_active: 1000,
        }
    }
}

impl RawTasks {
    /// The validated settings, or every offending key and what it must be.
    pub(crate) fn validate(&self) -> Result<TasksConfig, Vec<(&'static str, String)>> {
        let d = TasksConfig::default();
        let mut errors = Vec::new();
        let store = self.store.clone().unwrap_or(d.store);
        if !(store.starts_with("sqlite:")
            || store.starts_with("postgres:")
            || store.starts_with("postgresql:"))
        {
            errors.push((
                "store",
                "must start with sqlite: or postgres: (for example \"sqlite://tasks.db\")".into(),
            ));
        }
        let mut positive = |key: &'static str, v: Option<Duration>, default: Duration| match v {
            Some(v) if v.is_zero() => {
                errors.push((key, "must be longer than 0s".to_owned()));
                default
            }
            Some(v) => v,
            None => default,
        };
        let result_ttl = positive("result_ttl", self.result_ttl, d.result_ttl);
        let poll_interval = positive("poll_interval", self.poll_interval, d.poll_interval);
        let lease = positive("lease", self.lease, d.lease);
        if lease < Duration::from_millis(300) {
            errors.push(("lease", "must be at least 300ms".into()));
        }
        let concurrency = self.concurrency.unwrap_or(d.concurrency);
        if !(1..=10_000).contains(&concurrency) {
            errors.push(("concurrency", "must be 1 to 10000".into()));
        }
        let max_active = self.max_active.unwrap_or(d.max_active);
        if max_active == 0 {
            errors.push(("max_active", "must be at least 1".into()));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(TasksConfig {
            store,
            result_ttl,
            poll_interval,
            lease,
            concurrency,
            max_active,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn durable_tools_and_the_tasks_table_are_read_and_checked() {
        let c = Config::parse_toml(
            "[tasks]\nstore = \"sqlite:///tmp/t.db\"\nresult_ttl = \"10m\"\n\n\
             [tools.\"slow_*\"]\ndurable = true\n",
            "t.toml",
        )
        .unwrap();
        assert!(c.any_durable());
        assert!(c.tool("slow_report").durable);
        assert!(!c.tool("fast").durable);
        assert_eq!(c.tasks.result_ttl.as_secs(), 600);
        assert!(!Config::parse_toml("", "t.toml").unwrap().any_durable());

        let err = Config::parse_toml("[proxy]\n\n[tasks]\nstore = \"mysql://x\"\n", "t.toml")
            .unwrap_err();
        assert_eq!(
            err.to_string().split(": must").next().unwrap(),
            "t.toml:4: tasks.store"
        );
        let err = Config::parse_toml("[tasks]\nlease = \"100ms\"\n", "t.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml:2: tasks.lease: must be at least 300ms"
        );
        let err = Config::parse_toml("[tools.x]\ndurable = \"yes\"\n", "t.toml").unwrap_err();
        assert!(err.to_string().starts_with("t.toml:2: "), "{err}");
    }
}
