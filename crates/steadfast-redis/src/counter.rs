//! Call-limit counts in Redis, so a session moving between replicas keeps its count.
//!
//! One Lua script checks every key of a call and, only if all have room, increments them
//! (`INCR`, with `PEXPIRE` set by the first call of a window): all or nothing, atomically
//! across replicas. Redis down or slow: this replica counts in a [`MemoryCounter`] until it
//! returns (a session may then get up to one window's allowance per replica).

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;
use steadfast::{CallCounter, CountedKey, MemoryCounter};

use crate::RedisState;

/// A [`CallCounter`] on Redis; see the [module docs](self).
///
/// ```no_run
/// use std::time::Duration;
/// use steadfast::{CallKeys, CallLimit};
/// # async fn demo(state: steadfast_redis::RedisState) {
/// let limit = CallLimit::builder()
///     .per_session(100, Duration::from_secs(3600))
///     .per_tool(20, Duration::from_secs(3600))
///     .build_with(state.call_counter())
///     .unwrap();
/// limit.acquire(&CallKeys::new().session("s-1").tool("search")).await.unwrap();
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedisCallCounter {
    state: RedisState,
    local: MemoryCounter,
}

impl RedisState {
    /// A call-limit counter on this Redis.
    pub fn call_counter(&self) -> RedisCallCounter {
        RedisCallCounter {
            state: self.clone(),
            local: MemoryCounter::new(),
        }
    }
}

/// KEYS: the counters. ARGV: max and window (ms) for each key, in turn. Returns
/// `{0}` when counted, or `{i, pttl}` for the first full key.
static COUNT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
for i, k in ipairs(KEYS) do
  local n = tonumber(redis.call('GET', k) or '0')
  if n >= tonumber(ARGV[2 * i - 1]) then return {i, redis.call('PTTL', k)} end
end
for i, k in ipairs(KEYS) do
  if redis.call('INCR', k) == 1 then redis.call('PEXPIRE', k, ARGV[2 * i]) end
end
return {0}
"#,
    )
});

impl CallCounter for RedisCallCounter {
    async fn try_count(&self, keys: &[CountedKey]) -> Result<(), (usize, Option<Duration>)> {
        let prefix = &self.state.options().prefix;
        let answer = self
            .state
            .inner
            .run(|mut conn| {
                let mut call = COUNT.prepare_invoke();
                for k in keys {
                    call.key(format!("{prefix}:limit:{}", k.key));
                }
                for k in keys {
                    call.arg(k.max).arg(
                        u64::try_from(k.window.as_millis())
                            .unwrap_or(u64::MAX)
                            .max(1),
                    );
                }
                async move { call.invoke_async::<Vec<i64>>(&mut conn).await }
            })
            .await;
        match answer.as_deref() {
            Some([0]) => Ok(()),
            Some([i, pttl]) => {
                let index = usize::try_from(*i - 1).unwrap_or(0);
                let retry_in = (*pttl > 0).then(|| Duration::from_millis(pttl.unsigned_abs()));
                Err((index, retry_in))
            }
            _ => self.local.try_count_now(keys),
        }
    }
}
