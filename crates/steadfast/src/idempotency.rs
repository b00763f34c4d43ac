//! Idempotency keys, and running a side effect at most once per key.
//!
//! Retrying a read is harmless; retrying "send the e-mail" or "charge the card" is not, unless
//! the second attempt can be recognised as the first one again. A model that calls the same
//! tool with the same arguments twice in one session almost always means the same action, so
//! the key is derived from `(session, tool, arguments)`: [`idempotency_key`] hashes a canonical
//! JSON form of the three, in which object keys are sorted, so argument order does not matter.
//!
//! [`RunOnce`] then runs an operation at most once per key: a completed result is kept in an
//! [`IdempotencyStore`] for a TTL and handed to every later duplicate, and a duplicate that
//! arrives while the first call is still running waits for it instead of starting its own.
//! Failures are not stored: a failed call may not have happened, and a later duplicate runs
//! the operation again (with a retry policy around it, that is exactly a retry).

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::time::Instant;

/// A stable 32-hex-character key for one logical call: SHA-256 over the canonical JSON of
/// `[session, tool, params]`, truncated to 128 bits.
///
/// ```
/// use serde_json::json;
/// use steadfast::idempotency_key;
///
/// let a = idempotency_key("s1", "send_email", &json!({"to": "a@example.com", "body": "hi"}));
/// let b = idempotency_key("s1", "send_email", &json!({"body": "hi", "to": "a@example.com"}));
/// assert_eq!(a, b);
/// assert_eq!(a.len(), 32);
/// assert_ne!(a, idempotency_key("s2", "send_email", &json!({"to": "a@example.com", "body": "hi"})));
/// ```
pub fn idempotency_key(session: &str, tool: &str, params: &Value) -> String {
    let mut text = String::with_capacity(64);
    text.push('[');
    write_canonical(&mut text, &Value::from(session));
    text.push(',');
    write_canonical(&mut text, &Value::from(tool));
    text.push(',');
    write_canonical(&mut text, params);
    text.push(']');
    let digest = Sha256::digest(text.as_bytes());
    let mut key = String::with_capacity(32);
    for byte in &digest[..16] {
        let _ = write!(key, "{byte:02x}");
    }
    key
}

/// The canonical JSON text of `value`: no whitespace, object keys sorted by their UTF-8 bytes.
///
/// Sorting is done here rather than left to `serde_json`'s map type, because another crate in
/// the build enabling `serde_json/preserve_order` would otherwise change every key.
///
/// ```
/// let v = serde_json::json!({"b": [1, {"d": null, "c": 2.5}], "a": "x"});
/// assert_eq!(steadfast::canonical_json(&v), r#"{"a":"x","b":[1,{"c":2.5,"d":null}]}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write_canonical(out, v);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Where completed results live between duplicates. Implement it over Redis or a database to
/// share results across processes; [`MemoryStore`] keeps them in this one.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{IdempotencyStore, MemoryStore};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let store = MemoryStore::new();
/// store.put("k", 7, Duration::from_secs(60)).await.unwrap();
/// assert_eq!(store.get("k").await.unwrap(), Some(7));
/// tokio::time::advance(Duration::from_secs(61)).await;
/// assert_eq!(store.get("k").await.unwrap(), None);
/// # }
/// ```
pub trait IdempotencyStore<V>: Send + Sync {
    /// Why the store could not answer.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The stored result for `key`, unless there is none or it expired.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<V>, Self::Error>> + Send;

    /// Stores `value` under `key` for `ttl`.
    fn put(
        &self,
        key: &str,
        value: V,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Claims `key` for a leader in *another* process too, for at most `lease`: `true` if this
    /// caller may run the operation. A store shared by several processes answers `false` while
    /// another process holds the claim ([`RunOnce`] then waits for its result, or for the
    /// claim to be released or to expire — a leader that dies releases it by expiry). The default,
    /// right for a store used by one process, always grants it.
    fn claim(
        &self,
        key: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send {
        let _ = (key, lease);
        std::future::ready(Ok(true))
    }

    /// Gives up a claim after the operation failed, so another process may run it at once.
    fn release(&self, key: &str) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = key;
        std::future::ready(Ok(()))
    }
}

/// An in-process [`IdempotencyStore`] with per-entry expiry on tokio's clock. Expired entries
/// are dropped when read, and swept whenever the map has doubled since the last sweep, so
/// memory stays proportional to the live entries.
///
/// See [`IdempotencyStore`] for an example.
pub struct MemoryStore<V> {
    inner: Mutex<MemoryInner<V>>,
}

struct MemoryInner<V> {
    entries: HashMap<String, (V, Instant)>,
    sweep_at: usize,
}

impl<V> MemoryStore<V> {
    /// An empty store.
    ///
    /// ```
    /// let store = steadfast::MemoryStore::<String>::new();
    /// assert!(store.is_empty());
    /// ```
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(MemoryInner {
                entries: HashMap::new(),
                sweep_at: 64,
            }),
        }
    }

    /// Entries held, including any that expired but were not swept yet.
    ///
    /// ```
    /// assert_eq!(steadfast::MemoryStore::<u8>::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the store holds nothing.
    ///
    /// See [`MemoryStore::new`] for an example.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner<V>> {
        // A panic elsewhere cannot leave the map half-updated: every update is one call.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<V> Default for MemoryStore<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> std::fmt::Debug for MemoryStore<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.len())
            .finish()
    }
}

impl<V: Clone + Send + Sync> IdempotencyStore<V> for MemoryStore<V> {
    type Error = Infallible;

    async fn get(&self, key: &str) -> Result<Option<V>, Infallible> {
        let mut inner = self.lock();
        let now = Instant::now();
        match inner.entries.get(key) {
            Some((v, until)) if *until > now => Ok(Some(v.clone())),
            Some(_) => {
                inner.entries.remove(key);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn put(&self, key: &str, value: V, ttl: Duration) -> Result<(), Infallible> {
        let mut inner = self.lock();
        let now = Instant::now();
        let until = now
            .checked_add(ttl)
            .or_else(|| now.checked_add(Duration::from_secs(86_400 * 365)))
            .unwrap_or(now);
        inner.entries.insert(key.to_owned(), (value, until));
        if inner.entries.len() >= inner.sweep_at {
            inner.entries.retain(|_, (_, until)| *until > now);
            inner.sweep_at = (inner.entries.len() * 2).max(64);
        }
        Ok(())
    }
}

/// Why [`RunOnce::run`] returned no value.
#[derive(Debug, thiserror::Error)]
pub enum OnceError<E, S> {
    /// The operation failed (in this call, which was the one that ran it).
    #[error("{0}")]
    Failed(E),
    /// The store could not be read or written. When writing failed, the operation did run.
    #[error("idempotency store failed: {0}")]
    Store(S),
}

enum Slot<V> {
    Running,
    Done(V),
    Failed,
}

/// Runs side-effecting operations at most once per idempotency key (see [`idempotency_key`]):
/// completed results are stored for a TTL, concurrent duplicates wait for the first call, and
/// failures are not stored, so a later duplicate runs the operation again.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// use steadfast::{MemoryStore, RunOnce};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let once = Arc::new(RunOnce::new(MemoryStore::new(), Duration::from_secs(3600)));
/// let sent = Arc::new(AtomicU32::new(0));
/// let send = |once: Arc<RunOnce<String>>, sent: Arc<AtomicU32>| async move {
///     once.run("key-1", || async {
///         tokio::time::sleep(Duration::from_millis(50)).await;
///         Ok::<_, std::io::Error>(format!("message #{}", sent.fetch_add(1, Ordering::SeqCst) + 1))
///     })
///     .await
///     .unwrap()
/// };
/// let (a, b) = tokio::join!(send(once.clone(), sent.clone()), send(once.clone(), sent.clone()));
/// assert_eq!((a.as_str(), b.as_str()), ("message #1", "message #1"));
/// assert_eq!(sent.load(Ordering::SeqCst), 1);
/// # }
/// ```
pub struct RunOnce<V, S = MemoryStore<V>> {
    store: S,
    ttl: Duration,
    lease: Duration,
    running: Arc<Mutex<HashMap<String, watch::Receiver<Slot<V>>>>>,
}

impl<V, S> std::fmt::Debug for RunOnce<V, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOnce").field("ttl", &self.ttl).finish()
    }
}

/// Removes the running entry and wakes waiters however the leader ends, including when its
/// future is dropped mid-call.
struct Leader<V> {
    key: String,
    tx: watch::Sender<Slot<V>>,
    running: Arc<Mutex<HashMap<String, watch::Receiver<Slot<V>>>>>,
}

impl<V> Drop for Leader<V> {
    fn drop(&mut self) {
        if matches!(*self.tx.borrow(), Slot::Running) {
            self.tx.send_replace(Slot::Failed);
        }
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

impl<V, S> RunOnce<V, S>
where
    V: Clone + Send + Sync,
    S: IdempotencyStore<V>,
{
    /// Results are kept in `store` for `ttl` after they complete.
    ///
    /// See [`RunOnce`] for an example.
    pub fn new(store: S, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            lease: Duration::from_secs(60),
            running: Arc::default(),
        }
    }

    /// How long a leader's claim holds in a shared store ([`IdempotencyStore::claim`]) before
    /// another process may take over: longer than the operation can run (60 s unless set). A
    /// leader that dies is replaced after at most this long.
    ///
    /// ```
    /// use std::time::Duration;
    /// let once = steadfast::RunOnce::<u32>::new(steadfast::MemoryStore::new(), Duration::from_secs(60))
    ///     .lease(Duration::from_secs(5));
    /// # drop(once);
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Waits until this process holds the shared claim on `key` (`None`), or another
    /// process's result is stored (`Some`). Polls with a growing pause, 10 ms to 250 ms.
    async fn claim(&self, key: &str) -> Result<Option<V>, S::Error> {
        let mut pause = Duration::from_millis(10);
        loop {
            if self.store.claim(key, self.lease).await? {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
            if let Some(v) = self.store.get(key).await? {
                return Ok(Some(v));
            }
        }
    }

    /// The store holding completed results.
    ///
    /// ```
    /// use std::time::Duration;
    /// let once = steadfast::RunOnce::<u32>::new(steadfast::MemoryStore::new(), Duration::from_secs(1));
    /// assert!(once.store().is_empty());
    /// ```
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Returns the stored result for `key` if there is one, waits for a running call with the
    /// same key if there is one, and otherwise runs `op` and stores its success.
    ///
    /// If the call this one waited for fails or is cancelled, this call runs `op` itself.
    ///
    /// See [`RunOnce`] for an example.
    pub async fn run<E, F, Fut>(&self, key: &str, mut op: F) -> Result<V, OnceError<E, S::Error>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        loop {
            if let Some(v) = self.store.get(key).await.map_err(OnceError::Store)? {
                return Ok(v);
            }
            let waiting = {
                let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
                match running.get(key) {
                    Some(rx) => Err(rx.clone()),
                    None => {
                        let (tx, rx) = watch::channel(Slot::Running);
                        running.insert(key.to_owned(), rx);
                        Ok(Leader {
                            key: key.to_owned(),
                            tx,
                            running: self.running.clone(),
                        })
                    }
                }
            };
            match waiting {
                Err(mut rx) => {
                    let outcome = rx.wait_for(|s| !matches!(s, Slot::Running)).await;
                    if let Ok(slot) = outcome
                        && let Slot::Done(v) = &*slot
                    {
                        return Ok(v.clone());
                    }
                    // The first call failed or vanished: try again, perhaps as the leader.
                }
                Ok(leader) => {
                    // A leader that finished between our store read and our claim has already
                    // stored its result.
                    if let Some(v) = self.store.get(key).await.map_err(OnceError::Store)? {
                        return Ok(v);
                    }
                    if let Some(v) = self.claim(key).await.map_err(OnceError::Store)? {
                        return Ok(v);
                    }
                    return match op().await {
                        Ok(v) => {
                            let stored = self.store.put(key, v.clone(), self.ttl).await;
                            leader.tx.send_replace(Slot::Done(v.clone()));
                            drop(leader);
                            stored.map_err(OnceError::Store)?;
                            Ok(v)
                        }
                        Err(e) => {
                            // Best effort: an unreleased claim still expires with its lease.
                            let _ = self.store.release(key).await;
                            Err(OnceError::Failed(e))
                        }
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_nested_keys_and_escapes_strings() {
        let v = json!({"z": {"b": 1, "a": [true, "q\"uote"]}, "a": -0.5});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":-0.5,"z":{"a":[true,"q\"uote"],"b":1}}"#
        );
    }

    #[test]
    fn fields_cannot_run_into_each_other() {
        assert_ne!(
            idempotency_key("ab", "c", &json!({})),
            idempotency_key("a", "bc", &json!({}))
        );
    }

    #[test]
    fn key_is_lowercase_hex() {
        let k = idempotency_key("", "", &Value::Null);
        assert!(
            k.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(k.len(), 32);
    }

    #[tokio::test(start_paused = true)]
    async fn sweep_drops_expired_entries() {
        let store = MemoryStore::new();
        for i in 0..63 {
            store
                .put(&i.to_string(), i, Duration::from_secs(1))
                .await
                .unwrap();
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        store.put("live", 1, Duration::from_secs(10)).await.unwrap();
        assert_eq!(store.len(), 1);
    }
}
