//! How a replica talks to Redis: key prefix, bounds, quorum, report queue.

use std::time::Duration;

use crate::Error;

/// Options for [`RedisState::connect`](crate::RedisState::connect).
///
/// ```
/// use std::time::Duration;
/// let options = steadfast_redis::RedisOptions::new()
///     .prefix("gateway")
///     .op_timeout(Duration::from_millis(50))
///     .quorum(2);
/// assert_eq!(options.quorum_value(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct RedisOptions {
    pub(crate) prefix: String,
    pub(crate) replica: String,
    pub(crate) op_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) quorum: u32,
    pub(crate) report_capacity: usize,
    pub(crate) sync_every: Duration,
    pub(crate) probe_lease: Duration,
    pub(crate) budget_sync: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "steadfast".to_owned(),
            replica: format!("{}-{:08x}", std::process::id(), fastrand::u32(..)),
            op_timeout: Duration::from_millis(50),
            connect_timeout: Duration::from_millis(500),
            quorum: 1,
            report_capacity: 4096,
            sync_every: Duration::from_secs(1),
            probe_lease: Duration::from_secs(30),
            budget_sync: crate::budget::DEFAULT_SYNC,
        }
    }
}

impl RedisOptions {
    /// The defaults: prefix `steadfast`, a random replica id, 50 ms per operation, quorum 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// The first part of every key and of the pub/sub channel (`steadfast` unless set). Give
    /// each deployment (or each test) its own.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// This replica's id in the shared counters (the process id and a random suffix unless
    /// set). Two live replicas must not share one.
    pub fn replica(mut self, id: impl Into<String>) -> Self {
        self.replica = id.into();
        self
    }

    /// The longest any call waits on Redis before falling back to local state (50 ms).
    pub fn op_timeout(mut self, bound: Duration) -> Self {
        self.op_timeout = bound;
        self
    }

    /// The longest a (re)connection attempt may take (500 ms).
    pub fn connect_timeout(mut self, bound: Duration) -> Self {
        self.connect_timeout = bound;
        self
    }

    /// How many replicas must have reported failures in the window before a breaker opens for
    /// all of them (1). With 2 or more, one sick replica cannot open it for the others.
    pub fn quorum(mut self, replicas: u32) -> Self {
        self.quorum = replicas;
        self
    }

    /// The quorum set.
    pub fn quorum_value(&self) -> u32 {
        self.quorum
    }

    /// Probe events (results, slot requests) queued for Redis before new ones are dropped (and
    /// counted) rather than making a call wait (4096). Ordinary outcomes are not queued one by
    /// one: each breaker counts them in two atomics until the next batch.
    pub fn report_capacity(mut self, outcomes: usize) -> Self {
        self.report_capacity = outcomes;
        self
    }

    /// How often a replica re-reads shared breaker state and checks that Redis is back (1 s):
    /// the bound on how stale it can be after missing a pub/sub message.
    pub fn sync_every(mut self, every: Duration) -> Self {
        self.sync_every = every;
        self
    }

    /// How long a replica holds a shared breaker's half-open probe slot before another may take
    /// it (30 s): longer than a probe call can take.
    pub fn probe_lease(mut self, lease: Duration) -> Self {
        self.probe_lease = lease;
        self
    }

    /// How often a shared retry budget reports calls and tops up this replica's lease of
    /// retries (100 ms; sooner when the lease runs dry).
    pub fn budget_sync(mut self, every: Duration) -> Self {
        self.budget_sync = every;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        let bad =
            |field: &'static str, constraint: String| Err(Error::Option { field, constraint });
        let ms = |d: Duration| humantime_ms(d);
        if self.prefix.is_empty() || self.prefix.contains(char::is_whitespace) {
            return bad(
                "prefix",
                format!("be non-empty without spaces (got {:?})", self.prefix),
            );
        }
        if self.replica.is_empty() || self.replica.contains(char::is_whitespace) {
            return bad(
                "replica",
                format!("be non-empty without spaces (got {:?})", self.replica),
            );
        }
        for (field, d, lo, hi) in [
            ("op_timeout", self.op_timeout, 1, 10_000),
            ("connect_timeout", self.connect_timeout, 1, 60_000),
            ("sync_every", self.sync_every, 10, 3_600_000),
            ("probe_lease", self.probe_lease, 10, 3_600_000),
            ("budget_sync", self.budget_sync, 10, 60_000),
        ] {
            if d < Duration::from_millis(lo) || d > Duration::from_millis(hi) {
                return bad(
                    field,
                    format!("be between {lo}ms and {hi}ms (got {})", ms(d)),
                );
            }
        }
        if self.quorum == 0 {
            return bad("quorum", "be >= 1 (got 0)".to_owned());
        }
        if self.report_capacity == 0 || self.report_capacity > 1 << 20 {
            return bad(
                "report_capacity",
                format!("be between 1 and 1048576 (got {})", self.report_capacity),
            );
        }
        Ok(())
    }
}

fn humantime_ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}
