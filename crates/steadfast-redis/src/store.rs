//! An [`IdempotencyStore`] on Redis, so [`RunOnce`](steadfast::RunOnce) holds across processes.
//!
//! - A result is stored as JSON under `PREFIX:idem:KEY` with `PX` = the result's TTL.
//! - The leader's claim is `PREFIX:idem:KEY:lock`, taken with `SET NX PX lease`: while it
//!   exists, duplicates in other processes wait for the result; a leader that dies releases it
//!   by expiry, a leader that fails deletes it.
//! - Redis down or slow: results go to (and come from) a [`MemoryStore`] in this process, and
//!   claims are granted locally — duplicates are then caught within one process only, until
//!   Redis returns.

use std::marker::PhantomData;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use steadfast::{IdempotencyStore, MemoryStore};

use crate::RedisState;

/// A stored result could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("stored result for an idempotency key is not valid JSON for this type: {0}")]
pub struct StoreError(String);

/// Results shared through Redis; see the [module docs](self). Values are stored as JSON.
///
/// ```no_run
/// use std::time::Duration;
/// use steadfast::RunOnce;
/// # async fn demo(state: steadfast_redis::RedisState) {
/// let once = RunOnce::new(state.store::<String>(), Duration::from_secs(3600)).lease(Duration::from_secs(30));
/// let sent = once.run("key", || async { Ok::<_, std::io::Error>("sent".to_owned()) }).await;
/// # }
/// ```
pub struct RedisStore<V> {
    state: RedisState,
    local: MemoryStore<V>,
    _v: PhantomData<fn() -> V>,
}

impl<V> std::fmt::Debug for RedisStore<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.state.options().prefix)
            .finish()
    }
}

impl RedisState {
    /// An idempotency store on this Redis, for values of type `V`.
    pub fn store<V>(&self) -> RedisStore<V> {
        RedisStore {
            state: self.clone(),
            local: MemoryStore::new(),
            _v: PhantomData,
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl<V> RedisStore<V> {
    fn key(&self, key: &str) -> String {
        format!("{}:idem:{key}", self.state.options().prefix)
    }
}

impl<V> IdempotencyStore<V> for RedisStore<V>
where
    V: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    type Error = StoreError;

    async fn get(&self, key: &str) -> Result<Option<V>, StoreError> {
        let k = self.key(key);
        let found = self
            .state
            .inner
            .run(|mut conn| async move {
                redis::cmd("GET")
                    .arg(&k)
                    .query_async::<Option<String>>(&mut conn)
                    .await
            })
            .await;
        match found {
            Some(Some(json)) => serde_json::from_str(&json)
                .map(Some)
                .map_err(|e| StoreError(e.to_string())),
            Some(None) => Ok(None),
            None => Ok(self.local.get(key).await.unwrap_or(None)),
        }
    }

    async fn put(&self, key: &str, value: V, ttl: Duration) -> Result<(), StoreError> {
        let json = serde_json::to_string(&value).map_err(|e| StoreError(e.to_string()))?;
        let k = self.key(key);
        let stored = self
            .state
            .inner
            .run(|mut conn| async move {
                redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(&k)
                    .arg(json)
                    .arg("PX")
                    .arg(ms(ttl))
                    .ignore()
                    .cmd("DEL")
                    .arg(format!("{k}:lock"))
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            })
            .await;
        if stored.is_none() {
            let _ = self.local.put(key, value, ttl).await;
        }
        Ok(())
    }

    async fn claim(&self, key: &str, lease: Duration) -> Result<bool, StoreError> {
        let k = format!("{}:lock", self.key(key));
        let replica = self.state.options().replica.clone();
        let won = self
            .state
            .inner
            .run(|mut conn| async move {
                redis::cmd("SET")
                    .arg(&k)
                    .arg(replica)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms(lease))
                    .query_async::<Option<String>>(&mut conn)
                    .await
            })
            .await;
        // Redis away: this process's own RunOnce still deduplicates its callers.
        Ok(won.is_none_or(|w| w.is_some()))
    }

    async fn release(&self, key: &str) -> Result<(), StoreError> {
        let k = format!("{}:lock", self.key(key));
        self.state
            .inner
            .run(|mut conn| async move {
                redis::cmd("DEL").arg(&k).query_async::<()>(&mut conn).await
            })
            .await;
        Ok(())
    }
}
