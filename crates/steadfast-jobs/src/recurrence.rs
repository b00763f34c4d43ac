//! Fire times of a recurring schedule, and which of them to run after downtime.
//!
//! A recurring schedule keeps exactly one pending job (its next fire time). When a run ends
//! — or starts, if overlap is allowed — the next fire time is planned from the run's own fire
//! time, not from the wall clock, so the plan is the same whichever worker makes it, and the
//! unique `(schedule, fire_at)` index turns any duplicate into a no-op.

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;

use crate::JobsError;
use crate::options::CatchUp;

/// A parsed recurrence.
#[derive(Debug, Clone)]
pub(crate) enum Recurrence {
    Cron { cron: Box<Cron>, tz: Zone },
    Every { interval_ms: i64 },
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Zone {
    Utc,
    #[cfg(feature = "tz")]
    Named(chrono_tz::Tz),
}

impl Zone {
    pub(crate) fn parse(name: Option<&str>) -> Result<Self, JobsError> {
        match name {
            None | Some("UTC") | Some("Etc/UTC") => Ok(Self::Utc),
            #[cfg(feature = "tz")]
            Some(name) => name.parse::<chrono_tz::Tz>().map(Self::Named).map_err(|_| {
                JobsError::invalid("tz", format!("be an IANA time zone name (got {name:?})"))
            }),
            #[cfg(not(feature = "tz"))]
            Some(name) => Err(JobsError::invalid(
                "tz",
                format!("be UTC unless the `tz` feature is on (got {name:?})"),
            )),
        }
    }
}

impl Recurrence {
    pub(crate) fn cron(expr: &str, tz: Option<&str>) -> Result<Self, JobsError> {
        let cron = Cron::new(expr)
            .with_seconds_optional()
            .parse()
            .map_err(|e| {
                JobsError::invalid(
                    "cron",
                    format!("be a cron expression of 5 or 6 fields (got {expr:?}: {e})"),
                )
            })?;
        Ok(Self::Cron {
            cron: Box::new(cron),
            tz: Zone::parse(tz)?,
        })
    }

    pub(crate) fn every(interval_ms: i64) -> Result<Self, JobsError> {
        if interval_ms < 1_000 {
            return Err(JobsError::invalid(
                "interval",
                format!("be at least 1s (got {interval_ms}ms)"),
            ));
        }
        Ok(Self::Every { interval_ms })
    }

    /// The first fire time strictly after `after` (ms), if any.
    pub(crate) fn next_after(&self, after: i64) -> Option<i64> {
        match self {
            Self::Every { interval_ms } => after.checked_add(*interval_ms),
            Self::Cron { cron, tz } => {
                // Cron has one-second resolution: start from the whole second.
                let secs = after.div_euclid(1000);
                let start = DateTime::<Utc>::from_timestamp(secs, 0)?;
                let next = match tz {
                    Zone::Utc => next_in(cron, &start),
                    #[cfg(feature = "tz")]
                    Zone::Named(z) => next_in(cron, &start.with_timezone(z)),
                }?;
                Some(next)
            }
        }
    }

    /// Up to `cap` fire times in `(after, until]`, oldest first.
    fn between(&self, after: i64, until: i64, cap: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let mut t = after;
        while out.len() < cap {
            match self.next_after(t) {
                Some(n) if n <= until => {
                    out.push(n);
                    t = n;
                }
                _ => break,
            }
        }
        out
    }

    /// The last `m` fire times in `(after, until]`, oldest first, without walking every fire
    /// time of a long downtime: the window back from `until` doubles until it holds `m`.
    fn latest(&self, after: i64, until: i64, m: usize) -> Vec<i64> {
        let cap = 2 * m + 2;
        let mut w: i64 = 1_000;
        for _ in 0..80 {
            let lo = until.saturating_sub(w).max(after);
            let v = self.between(lo, until, cap);
            if v.len() == cap {
                // Overshot: too many in the window to be sure these are the latest.
                w = (w / 4 * 3).max(1);
                continue;
            }
            if v.len() >= m || lo == after {
                let skip = v.len().saturating_sub(m);
                return v[skip..].to_vec();
            }
            w = w.saturating_mul(2);
        }
        Vec::new()
    }

    /// The next job of the schedule after the run for `fire_at`, planned at `now`:
    /// `(fire_at, run_at)`, or `None` when the recurrence has no more fire times.
    pub(crate) fn plan(
        &self,
        fire_at: i64,
        now: i64,
        catch_up: CatchUp,
        max_catch_up: u32,
    ) -> Option<(i64, i64)> {
        if let Self::Every { interval_ms: i } = *self {
            // Closed form, keeping the schedule's phase: fire times are fire_at + k * i.
            let missed = now.saturating_sub(fire_at).div_euclid(i);
            if missed < 1 {
                let next = fire_at.checked_add(i)?;
                return Some((next, next));
            }
            return match catch_up {
                CatchUp::Skip | CatchUp::One => {
                    let next = fire_at.checked_add(i.checked_mul(missed + 1)?)?;
                    Some((next, next))
                }
                CatchUp::All => {
                    let k = (missed - i64::from(max_catch_up.max(1)) + 1).max(1);
                    Some((fire_at.checked_add(i.checked_mul(k)?)?, now))
                }
            };
        }
        let first = self.next_after(fire_at)?;
        if first > now {
            return Some((first, first));
        }
        // `first` was missed.
        match catch_up {
            // The run that just ended stood for every fire time missed before it (`One`), or
            // a stale fire time was dropped (`Skip`): resume at the next one.
            CatchUp::Skip | CatchUp::One => {
                let next = self.next_after(now)?;
                Some((next, next))
            }
            CatchUp::All => {
                let pick = self
                    .latest(fire_at, now, max_catch_up.max(1) as usize)
                    .first()
                    .copied()
                    .unwrap_or(first);
                Some((pick, now))
            }
        }
    }

    /// Whether a run for `fire_at`, starting at `now`, was missed (a later fire time has come
    /// too), which [`CatchUp::Skip`] drops.
    pub(crate) fn is_stale(&self, fire_at: i64, now: i64) -> bool {
        self.next_after(fire_at).is_some_and(|n| n <= now)
    }
}

fn next_in<Tz: TimeZone>(cron: &Cron, start: &DateTime<Tz>) -> Option<i64> {
    cron.find_next_occurrence(start, false)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> i64 {
        s.parse::<DateTime<Utc>>().unwrap().timestamp_millis()
    }

    #[test]
    fn cron_five_and_six_fields() {
        let r = Recurrence::cron("*/5 * * * *", None).unwrap();
        assert_eq!(
            r.next_after(t("2030-01-01T00:01:00Z")),
            Some(t("2030-01-01T00:05:00Z"))
        );
        let r = Recurrence::cron("30 * * * * *", None).unwrap();
        assert_eq!(
            r.next_after(t("2030-01-01T00:01:00Z")),
            Some(t("2030-01-01T00:01:30Z"))
        );
        let err = Recurrence::cron("not cron", None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid cron: be a cron expression"),
            "{err}"
        );
    }

    #[test]
    fn catch_up_after_downtime() {
        let hourly = Recurrence::cron("0 * * * *", None).unwrap();
        let fire = t("2030-01-01T00:00:00Z");
        let now = t("2030-01-01T05:30:00Z"); // 01..05 were missed
        assert_eq!(
            hourly.plan(fire, now, CatchUp::Skip, 100),
            Some((t("2030-01-01T06:00:00Z"), t("2030-01-01T06:00:00Z")))
        );
        assert_eq!(
            hourly.plan(fire, now, CatchUp::One, 100),
            Some((t("2030-01-01T06:00:00Z"), t("2030-01-01T06:00:00Z")))
        );
        assert_eq!(
            hourly.plan(fire, now, CatchUp::All, 100),
            Some((t("2030-01-01T01:00:00Z"), now))
        );
        assert_eq!(
            hourly.plan(fire, now, CatchUp::All, 2),
            Some((t("2030-01-01T04:00:00Z"), now))
        );
        // Not late: the next fire time, whatever the mode.
        let early = t("2030-01-01T00:10:00Z");
        assert_eq!(
            hourly.plan(fire, early, CatchUp::One, 100),
            Some((t("2030-01-01T01:00:00Z"), t("2030-01-01T01:00:00Z")))
        );
    }

    #[test]
    fn long_downtime_of_a_per_second_cron_is_planned_quickly() {
        let every_second = Recurrence::cron("* * * * * *", None).unwrap();
        let fire = t("2030-01-01T00:00:00Z");
        let now = t("2030-03-01T00:00:00Z"); // ~5 million missed fire times
        let (all, _) = every_second.plan(fire, now, CatchUp::All, 100).unwrap();
        assert_eq!(all, now - 99_000);
    }

    #[cfg(feature = "tz")]
    #[test]
    fn cron_in_a_time_zone() {
        // 09:00 in Paris is 08:00 UTC in winter, 07:00 UTC in summer.
        let r = Recurrence::cron("0 9 * * *", Some("Europe/Paris")).unwrap();
        assert_eq!(
            r.next_after(t("2030-01-10T00:00:00Z")),
            Some(t("2030-01-10T08:00:00Z"))
        );
        assert_eq!(
            r.next_after(t("2030-07-10T00:00:00Z")),
            Some(t("2030-07-10T07:00:00Z"))
        );
        let err = Recurrence::cron("0 9 * * *", Some("Mars/Olympus")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid tz: be an IANA time zone name (got \"Mars/Olympus\")"
        );
    }

    #[test]
    fn intervals() {
        let r = Recurrence::every(60_000).unwrap();
        assert_eq!(r.plan(0, 10_000, CatchUp::One, 10), Some((60_000, 60_000)));
        assert_eq!(
            r.plan(0, 250_000, CatchUp::One, 10),
            Some((300_000, 300_000))
        );
        assert_eq!(
            r.plan(0, 250_000, CatchUp::All, 2),
            Some((180_000, 250_000))
        );
        assert!(r.is_stale(0, 60_000));
        assert!(!r.is_stale(0, 59_999));
        assert!(
            Recurrence::every(10)
                .unwrap_err()
                .to_string()
                .contains("at least 1s")
        );
    }
}
