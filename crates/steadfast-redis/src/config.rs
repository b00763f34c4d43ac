//! The `[state]` table of a gateway's configuration.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, RedisOptions, RedisState};

/// Shared-state settings as a config file holds them; every field but `redis` is optional and
/// defaults as in [`RedisOptions`].
///
/// ```
/// let config: steadfast_redis::StateConfig = toml::from_str(r#"
///     redis = "redis://127.0.0.1:6379"
///     prefix = "gateway"
///     op_timeout = "50ms"
///     quorum = 2
/// "#).unwrap();
/// assert_eq!(config.options().quorum_value(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `redis://[user:password@]host:port[/db]`; no shared state when absent.
    pub redis: Option<String>,
    /// Key prefix ([`RedisOptions::prefix`]).
    pub prefix: Option<String>,
    /// This replica's id ([`RedisOptions::replica`]).
    pub replica: Option<String>,
    /// Bound on each operation a call waits on ([`RedisOptions::op_timeout`]).
    #[serde(default, with = "humantime_serde")]
    pub op_timeout: Option<Duration>,
    /// Bound on each (re)connection attempt ([`RedisOptions::connect_timeout`]).
    #[serde(default, with = "humantime_serde")]
    pub connect_timeout: Option<Duration>,
    /// Replicas that must report failures before a breaker opens for all
    /// ([`RedisOptions::quorum`]).
    pub quorum: Option<u32>,
    /// Re-read of shared breaker state ([`RedisOptions::sync_every`]).
    #[serde(default, with = "humantime_serde")]
    pub sync_every: Option<Duration>,
    /// Probe slot lease ([`RedisOptions::probe_lease`]).
    #[serde(default, with = "humantime_serde")]
    pub probe_lease: Option<Duration>,
    /// Budget lease top-up interval ([`RedisOptions::budget_sync`]).
    #[serde(default, with = "humantime_serde")]
    pub budget_sync: Option<Duration>,
    /// Outcome queue size ([`RedisOptions::report_capacity`]).
    pub report_capacity: Option<usize>,
}

impl StateConfig {
    /// The options these settings describe (defaults where unset).
    pub fn options(&self) -> RedisOptions {
        let mut o = RedisOptions::new();
        if let Some(v) = &self.prefix {
            o = o.prefix(v.clone());
        }
        if let Some(v) = &self.replica {
            o = o.replica(v.clone());
        }
        if let Some(v) = self.op_timeout {
            o = o.op_timeout(v);
        }
        if let Some(v) = self.connect_timeout {
            o = o.connect_timeout(v);
        }
        if let Some(v) = self.quorum {
            o = o.quorum(v);
        }
        if let Some(v) = self.sync_every {
            o = o.sync_every(v);
        }
        if let Some(v) = self.probe_lease {
            o = o.probe_lease(v);
        }
        if let Some(v) = self.budget_sync {
            o = o.budget_sync(v);
        }
        if let Some(v) = self.report_capacity {
            o = o.report_capacity(v);
        }
        o
    }

    /// Checks the settings without connecting (for `check-config`): the URL parses and every
    /// option is in range. Errors name the field.
    ///
    /// ```
    /// let bad = steadfast_redis::StateConfig { quorum: Some(0), ..Default::default() };
    /// assert_eq!(bad.validate().unwrap_err().to_string(), "redis options: quorum: must be >= 1 (got 0)");
    /// ```
    pub fn validate(&self) -> Result<(), Error> {
        self.options().validate()?;
        if let Some(url) = &self.redis {
            crate::state::parse_url(url)?;
        }
        Ok(())
    }

    /// Connects when `redis` is set; `Ok(None)` when it is not (local state only).
    pub async fn connect(&self) -> Result<Option<RedisState>, Error> {
        match &self.redis {
            Some(url) => RedisState::connect(url, self.options()).await.map(Some),
            None => Ok(None),
        }
    }
}
