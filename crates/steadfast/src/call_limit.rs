//! Caps on how many calls a session, a tool or an upstream may make in a window.
//!
//! A model in a loop can call the same tool hundreds of times; retries multiply that. A
//! [`CallLimit`] counts **every attempt sent** — a retry is a call, as synaptic's and LangChain's
//! `ToolCallLimitMiddleware` count them — and refuses the next one once a cap is reached, with an
//! error whose [`LlmError`](crate::LlmError) code is `TOOL_CALL_LIMIT` and whose suggestion tells
//! the model plainly not to call that tool again in this session.
//!
//! The limit sits *outside* the retry loop and each attempt passes through it: wrap the attempt
//! with [`CallLimit::attempt`] inside [`Retry::run`](crate::Retry::run), or call a
//! [`ToolSet`](crate::ToolSet) through [`ToolSet::call_limited`](crate::ToolSet::call_limited),
//! which checks before the first attempt and stops retrying when a retry would cross a cap. An
//! attempt refused by the limit is never sent, is not retried, and never counts against a breaker.
//!
//! Counts live in a [`CallCounter`]: [`MemoryCounter`] in this process, or a shared one (the
//! `steadfast-redis` crate counts in Redis, so a session moving between replicas keeps its count).
//! Windows are fixed: a key's window starts with its first counted call.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::{Classify, ErrorClass, ErrorCode, ErrorKind, PolicyError};

impl ErrorCode {
    /// A [`CallLimit`] refused the call: the model should not call that tool again in this session.
    pub const TOOL_CALL_LIMIT: Self = Self::from_static("TOOL_CALL_LIMIT");
}

/// What a cap counts.
///
/// ```
/// assert_eq!(steadfast::CallScope::Tool.as_str(), "tool");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallScope {
    /// Every call in one session, whatever the tool.
    Session,
    /// Calls to one tool in one session (or everywhere, when no session is named).
    Tool,
    /// Every call to one upstream (dependency), across sessions.
    Upstream,
}

impl CallScope {
    /// The name used in keys and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Tool => "tool",
            Self::Upstream => "upstream",
        }
    }
}

/// One cap: at most `max` calls per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cap {
    scope: CallScope,
    max: u64,
    window: Duration,
}

/// Which session, tool and upstream a call belongs to. Scopes left unnamed are not counted.
///
/// ```
/// let keys = steadfast::CallKeys::new().session("s-1").tool("search").upstream("web");
/// assert_eq!(keys.tool_name(), Some("search"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallKeys {
    session: Option<String>,
    tool: Option<String>,
    upstream: Option<String>,
}

impl CallKeys {
    /// No scope named yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the session (an MCP session id, a conversation or thread id).
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Names the tool.
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Names the upstream or dependency.
    pub fn upstream(mut self, upstream: impl Into<String>) -> Self {
        self.upstream = Some(upstream.into());
        self
    }

    /// The tool, if named.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The counter key for `scope`, if the scope is named. Parts are length-prefixed so that no
    /// two different (session, tool) pairs share a key.
    fn key(&self, scope: CallScope) -> Option<String> {
        match scope {
            CallScope::Session => self.session.as_ref().map(|s| format!("s:{s}")),
            CallScope::Tool => self.tool.as_ref().map(|t| match &self.session {
                Some(s) => format!("t:{}:{s}:{t}", s.len()),
                None => format!("t::{t}"),
            }),
            CallScope::Upstream => self.upstream.as_ref().map(|u| format!("u:{u}")),
        }
    }
}

/// One key to count a call against, as a [`CallCounter`] receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedKey {
    /// What the key counts.
    pub scope: CallScope,
    /// The counter's key (scope prefix and names; unique per session, tool or upstream).
    pub key: String,
    /// The cap.
    pub max: u64,
    /// The window the cap applies to.
    pub window: Duration,
}

/// A call refused because a cap was reached.
///
/// ```
/// use steadfast::{CallKeys, CallLimit};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limit = CallLimit::builder().per_tool(1, std::time::Duration::from_secs(60)).build().unwrap();
/// let keys = CallKeys::new().session("s").tool("search");
/// limit.acquire(&keys).await.unwrap();
/// let refused = limit.acquire(&keys).await.unwrap_err();
/// assert_eq!(refused.class().code.as_str(), "TOOL_CALL_LIMIT");
/// assert_eq!(refused.to_string(), "tool call limit reached: at most 1 call per 1m to tool search");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct CallLimitExceeded {
    /// The cap that refused the call.
    pub scope: CallScope,
    /// Its maximum.
    pub max: u64,
    /// Its window.
    pub window: Duration,
    /// The tool, if the call named one.
    pub tool: Option<String>,
    /// When the window ends and the key may call again, if known.
    pub retry_in: Option<Duration>,
}

impl fmt::Display for CallLimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tool call limit reached: at most {} call{} per {} ",
            self.max,
            if self.max == 1 { "" } else { "s" },
            humantime::format_duration(self.window)
        )?;
        match (self.scope, &self.tool) {
            (CallScope::Tool, Some(t)) => write!(f, "to tool {t}"),
            (CallScope::Tool, None) => f.write_str("to this tool"),
            (CallScope::Session, _) => f.write_str("in this session"),
            (CallScope::Upstream, _) => f.write_str("to this upstream"),
        }
    }
}

impl CallLimitExceeded {
    /// Builds the refusal for `key` (for [`CallCounter`] implementations).
    pub fn new(key: &CountedKey, tool: Option<&str>, retry_in: Option<Duration>) -> Self {
        Self {
            scope: key.scope,
            max: key.max,
            window: key.window,
            tool: tool.map(str::to_owned),
            retry_in,
        }
    }

    /// `TOOL_CALL_LIMIT`: not retriable, not a breaker failure. No `retry_after` is set, so the
    /// model is not invited to come back.
    pub fn class(&self) -> ErrorClass {
        ErrorClass::new(ErrorKind::NonRetriable, ErrorCode::TOOL_CALL_LIMIT)
            .with_breaker_failure(false)
            .with_message(self.to_string())
    }
}

impl Classify for CallLimitExceeded {
    fn classify(&self) -> ErrorClass {
        self.class()
    }
}

/// Where call counts live. Implementations must count all keys or none: a refused call takes
/// nothing from the keys that still had room.
pub trait CallCounter: Send + Sync {
    /// Counts one call against every key in `keys`, unless one of them is at its `max`; then
    /// counts nothing and returns the first full key's index and, if known, when its window ends.
    fn try_count(
        &self,
        keys: &[CountedKey],
    ) -> impl Future<Output = Result<(), (usize, Option<Duration>)>> + Send;
}

/// Counts in this process, with fixed windows on tokio's clock. Expired keys are swept whenever
/// the map has doubled since the last sweep, so memory follows the keys active in a window.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{CallCounter, CallScope, CountedKey, MemoryCounter};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let c = MemoryCounter::new();
/// let key = CountedKey { scope: CallScope::Session, key: "s:a".into(), max: 1, window: Duration::from_secs(1) };
/// assert!(c.try_count(std::slice::from_ref(&key)).await.is_ok());
/// assert!(c.try_count(std::slice::from_ref(&key)).await.is_err());
/// tokio::time::advance(Duration::from_secs(1)).await;
/// assert!(c.try_count(std::slice::from_ref(&key)).await.is_ok());
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryCounter {
    inner: Arc<Mutex<Counts>>,
}

#[derive(Debug, Default)]
struct Counts {
    /// key → (count, window end).
    keys: HashMap<String, (u64, Instant)>,
    sweep_at: usize,
}

impl MemoryCounter {
    /// An empty counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts synchronously (the [`CallCounter`] impl is this, made async).
    pub fn try_count_now(&self, keys: &[CountedKey]) -> Result<(), (usize, Option<Duration>)> {
        let now = Instant::now();
        let mut counts = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for (i, k) in keys.iter().enumerate() {
            if let Some((n, until)) = counts.keys.get(&k.key)
                && *until > now
                && *n >= k.max
            {
                return Err((i, Some(*until - now)));
            }
        }
        for k in keys {
            let entry = counts
                .keys
                .entry(k.key.clone())
                .or_insert((0, now + k.window));
            if entry.1 <= now {
                *entry = (0, now + k.window);
            }
            entry.0 += 1;
        }
        if counts.keys.len() >= counts.sweep_at {
            counts.keys.retain(|_, (_, until)| *until > now);
            counts.sweep_at = (counts.keys.len() * 2).max(64);
        }
        Ok(())
    }

    /// Keys currently held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys
            .len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl CallCounter for MemoryCounter {
    async fn try_count(&self, keys: &[CountedKey]) -> Result<(), (usize, Option<Duration>)> {
        self.try_count_now(keys)
    }
}

/// Caps per session, per tool and per upstream, counted by a [`CallCounter`]. Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{CallKeys, CallLimit, ErrorClass, Limited, LlmErrorCode, Retry, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limit = CallLimit::builder().per_session(4, Duration::from_secs(3600)).build().unwrap();
/// let keys = CallKeys::new().session("s-1").tool("search");
/// let retry = Retry::<(), Limited<ErrorClass>>::new(RetryPolicy::builder().max_attempts(3).build().unwrap());
///
/// // Three attempts (two retries) count three calls ...
/// let first = retry.run(|_| limit.attempt(&keys, async { Err::<(), _>(ErrorClass::from_status(503)) })).await;
/// assert_eq!(first.unwrap_err().attempts(), 3);
/// // ... so the next call gets one attempt, and the one after that none.
/// let second = retry.run(|_| limit.attempt(&keys, async { Err::<(), _>(ErrorClass::from_status(503)) })).await;
/// let err = second.unwrap_err();
/// assert_eq!(err.attempts(), 2);
/// assert_eq!(err.to_llm_error("search").code, LlmErrorCode::ToolCallLimit);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CallLimit<C = MemoryCounter> {
    caps: Arc<[Cap]>,
    counter: C,
}

/// Builds a [`CallLimit`]; see [`CallLimit::builder`].
#[derive(Debug, Clone, Default)]
pub struct CallLimitBuilder {
    caps: Vec<Cap>,
}

impl CallLimitBuilder {
    fn cap(mut self, scope: CallScope, max: u64, window: Duration) -> Self {
        self.caps.retain(|c| c.scope != scope);
        self.caps.push(Cap { scope, max, window });
        self
    }

    /// At most `max` calls per session in `window`.
    pub fn per_session(self, max: u64, window: Duration) -> Self {
        self.cap(CallScope::Session, max, window)
    }

    /// At most `max` calls to each tool in a session (per tool overall, for calls naming no
    /// session) in `window`.
    pub fn per_tool(self, max: u64, window: Duration) -> Self {
        self.cap(CallScope::Tool, max, window)
    }

    /// At most `max` calls to each upstream in `window`, across sessions.
    pub fn per_upstream(self, max: u64, window: Duration) -> Self {
        self.cap(CallScope::Upstream, max, window)
    }

    /// Checks the caps: each `max` at least 1, each window between 1 ms and 30 days.
    ///
    /// ```
    /// let err = steadfast::CallLimit::builder().per_tool(0, std::time::Duration::from_secs(1)).build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid call limit: tool.max must be >= 1 (got 0)");
    /// ```
    pub fn build(self) -> Result<CallLimit, PolicyError> {
        self.build_with(MemoryCounter::new())
    }

    /// [`build`](Self::build) with another counter (a shared one).
    pub fn build_with<C: CallCounter>(self, counter: C) -> Result<CallLimit<C>, PolicyError> {
        for c in &self.caps {
            let field = |name: &'static str| match (c.scope, name) {
                (CallScope::Session, "max") => "session.max",
                (CallScope::Tool, "max") => "tool.max",
                (CallScope::Upstream, "max") => "upstream.max",
                (CallScope::Session, _) => "session.window",
                (CallScope::Tool, _) => "tool.window",
                (CallScope::Upstream, _) => "upstream.window",
            };
            if c.max == 0 {
                return Err(PolicyError::in_section(
                    "call limit",
                    field("max"),
                    "be >= 1 (got 0)",
                ));
            }
            if c.window < Duration::from_millis(1) || c.window > Duration::from_secs(30 * 86_400) {
                return Err(PolicyError::in_section(
                    "call limit",
                    field("window"),
                    format!(
                        "be between 1ms and 30days (got {})",
                        humantime::format_duration(c.window)
                    ),
                ));
            }
        }
        Ok(CallLimit {
            caps: self.caps.into(),
            counter,
        })
    }
}

impl CallLimit {
    /// Starts a limit with no caps.
    pub fn builder() -> CallLimitBuilder {
        CallLimitBuilder::default()
    }
}

impl<C: CallCounter> CallLimit<C> {
    /// The counter.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    fn counted(&self, keys: &CallKeys) -> Vec<CountedKey> {
        self.caps
            .iter()
            .filter_map(|c| {
                keys.key(c.scope).map(|key| CountedKey {
                    scope: c.scope,
                    key,
                    max: c.max,
                    window: c.window,
                })
            })
            .collect()
    }

    /// Counts one call (one attempt) for `keys`, or refuses it if a cap is reached.
    ///
    /// See [`CallLimitExceeded`] for an example.
    pub async fn acquire(&self, keys: &CallKeys) -> Result<(), CallLimitExceeded> {
        let counted = self.counted(keys);
        if counted.is_empty() {
            return Ok(());
        }
        self.counter
            .try_count(&counted)
            .await
            .map_err(|(i, retry_in)| {
                let k = &counted[i.min(counted.len() - 1)];
                CallLimitExceeded::new(k, keys.tool_name(), retry_in)
            })
    }

    /// Runs one attempt if the limit allows it: the wrapper to use inside
    /// [`Retry::run`](crate::Retry::run) (see [`CallLimit`]).
    pub async fn attempt<T, E>(
        &self,
        keys: &CallKeys,
        attempt: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Limited<E>> {
        self.acquire(keys).await.map_err(Limited::Exceeded)?;
        attempt.await.map_err(Limited::Failed)
    }
}

/// An attempt's error under a [`CallLimit`]: refused by the limit, or failed on its own.
#[derive(Debug)]
pub enum Limited<E> {
    /// The limit refused the attempt; it was not made.
    Exceeded(CallLimitExceeded),
    /// The attempt was made and failed.
    Failed(E),
}

impl<E: fmt::Display> fmt::Display for Limited<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exceeded(e) => e.fmt(f),
            Self::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Limited<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Exceeded(e) => Some(e),
            Self::Failed(e) => Some(e),
        }
    }
}

impl<E: Classify> Classify for Limited<E> {
    fn classify(&self) -> ErrorClass {
        match self {
            Self::Exceeded(e) => e.class(),
            Self::Failed(e) => e.classify(),
        }
    }
}
