//! Jobs finished per minute and their start latency, over the last hour.
//!
//! The store keeps no event log, so both are read off the jobs themselves: a finished job's
//! `finished_at` says which minute it counts in, and a job that finished on its first attempt
//! still holds the run time it was due at, so `first_attempt_at - run_at` is its start latency
//! (a retried job's run time was moved by the retry, so it is left out of the latency).
//!
//! The query groups in the database (one row per minute and state, never a row per job), over
//! the `(state, finished_at)` index. A minute that ended more than [`SETTLED_MINUTES`] ago no
//! longer changes, so it is cached: each refresh reads only the last few minutes, whatever
//! the throughput; a new inspector reads the hour back a few minutes per call (newest first)
//! rather than all at once.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::JobsError;
use crate::clock::from_ms;
use crate::inspect::types::{LATENCY_BOUNDS_MS, Minute};
use crate::store::Store;

const MINUTE_MS: i64 = 60_000;
/// Minutes that may still gain jobs (the current one, and the one before for workers whose
/// clocks lag); older ones are cached.
const SETTLED_MINUTES: i64 = 2;
/// Most settled minutes not cached yet that one call reads (newest first): the first calls
/// of a new inspector fill the hour back this many minutes at a time.
const BACKFILL_MINUTES: i64 = 5;

/// Cached minutes, by minute number (ms / 60,000).
#[derive(Debug, Default)]
pub(crate) struct MinuteCache {
    settled: BTreeMap<i64, Minute>,
}

impl MinuteCache {
    /// The `minutes` minutes up to and including the one holding `now`, oldest first.
    pub(crate) async fn last(
        &mut self,
        store: &Store,
        now: i64,
        minutes: i64,
    ) -> Result<Vec<Minute>, JobsError> {
        let current = now.div_euclid(MINUTE_MS);
        let first = current - minutes + 1;
        // Read the minutes that may still change, and the newest few settled ones not cached
        // yet (at most BACKFILL_MINUTES, contiguous); older missing ones wait for the next
        // calls.
        let settled_end = current - SETTLED_MINUTES;
        let mut top = settled_end;
        while top >= first && self.settled.contains_key(&top) {
            top -= 1;
        }
        let mut bottom = top + 1;
        while bottom > first
            && top - (bottom - 1) < BACKFILL_MINUTES
            && !self.settled.contains_key(&(bottom - 1))
        {
            bottom -= 1;
        }
        let mut fresh = read(
            store,
            (settled_end + 1) * MINUTE_MS,
            (current + 1) * MINUTE_MS,
        )
        .await?;
        if bottom <= top {
            fresh.extend(read(store, bottom * MINUTE_MS, (top + 1) * MINUTE_MS).await?);
        }
        let read_now = |m: i64| m > settled_end || (bottom..=top).contains(&m);
        self.settled.retain(|m, _| *m >= first);
        let mut out = Vec::with_capacity(usize::try_from(minutes).unwrap_or(0));
        for m in first..=current {
            let minute = match self.settled.get(&m) {
                Some(cached) => cached.clone(),
                None if !read_now(m) => Minute {
                    at: from_ms(m * MINUTE_MS),
                    ..Default::default()
                },
                None => {
                    let mut minute = fresh.get(&m).cloned().unwrap_or_default();
                    minute.at = from_ms(m * MINUTE_MS);
                    minute.read = true;
                    if m <= settled_end {
                        self.settled.insert(m, minute.clone());
                    }
                    minute
                }
            };
            out.push(minute);
        }
        Ok(out)
    }
}

/// One row per minute and final state in `[from, to)`.
async fn read(store: &Store, from: i64, to: i64) -> Result<BTreeMap<i64, Minute>, JobsError> {
    let buckets: String = LATENCY_BOUNDS_MS
        .iter()
        .enumerate()
        .map(|(i, bound)| {
            let low = if i == 0 {
                String::new()
            } else {
                format!("lat >= {} AND ", LATENCY_BOUNDS_MS[i - 1])
            };
            format!(", SUM(CASE WHEN {low}lat < {bound} THEN 1 ELSE 0 END)")
        })
        .collect();
    let last = LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.len() - 1];
    // Clock skew between a worker and the enqueuer can make a latency negative: it counts as 0.
    let sql = format!(
        "SELECT m, state, COUNT(*){buckets}, SUM(CASE WHEN lat >= {last} THEN 1 ELSE 0 END) FROM ( \
           SELECT finished_at / {MINUTE_MS} AS m, state, \
             CASE WHEN attempts = 1 AND first_attempt_at IS NOT NULL \
               THEN (CASE WHEN first_attempt_at > run_at THEN first_attempt_at - run_at ELSE 0 END) END AS lat \
           FROM steadfast_jobs WHERE state IN ('done', 'dead') AND finished_at >= $1 AND finished_at < $2 \
         ) t GROUP BY m, state"
    );
    let rows = sqlx::query(&sql)
        .bind(from)
        .bind(to)
        .fetch_all(store.pool())
        .await?;
    let mut out: BTreeMap<i64, Minute> = BTreeMap::new();
    for r in rows {
        let m: i64 = r.try_get(0)?;
        let state: String = r.try_get(1)?;
        let n = count(r.try_get(2)?);
        let minute = out.entry(m).or_default();
        if state == "done" {
            minute.done += n;
        } else {
            minute.dead += n;
        }
        for (i, slot) in minute.latency.iter_mut().enumerate() {
            // SUM over no rows is NULL on PostgreSQL.
            *slot += count(r.try_get::<Option<i64>, _>(3 + i)?.unwrap_or(0));
        }
    }
    Ok(out)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
