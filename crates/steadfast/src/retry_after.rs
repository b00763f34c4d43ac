//! `Retry-After` parsing (RFC 9110 §10.2.3).
//!
//! A server that says when to come back knows more than any backoff formula, and ignoring it
//! hammers the dependency during the very window it asked for quiet. The header comes in two
//! forms — a number of seconds (`Retry-After: 120`) or an HTTP date
//! (`Retry-After: Fri, 31 Dec 1999 23:59:59 GMT`) — and both are turned into a [`Duration`]
//! from now. The engine treats it as a floor on the backoff delay, clamped by the policy's
//! [`max_retry_after`](crate::RetryPolicy::max_retry_after).

use std::time::{Duration, SystemTime};

/// Why a `Retry-After` value could not be read.
///
/// ```
/// let err = steadfast::parse_retry_after("soon").unwrap_err();
/// assert!(err.to_string().contains("soon"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid Retry-After value {value:?}: expected delta-seconds (\"120\") or an HTTP-date (\"Fri, 31 Dec 1999 23:59:59 GMT\")"
)]
pub struct RetryAfterError {
    value: String,
}

/// Parses a `Retry-After` header value relative to the system clock.
///
/// A date in the past means "now" ([`Duration::ZERO`]).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(steadfast::parse_retry_after("120").unwrap(), Duration::from_secs(120));
/// assert_eq!(
///     steadfast::parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT").unwrap(),
///     Duration::ZERO
/// );
/// ```
pub fn parse_retry_after(value: &str) -> Result<Duration, RetryAfterError> {
    parse_retry_after_at(value, SystemTime::now())
}

/// Parses a `Retry-After` header value relative to `now` (for tests and replays).
///
/// Accepts delta-seconds (ASCII digits only, as RFC 9110 requires; very large values saturate)
/// and the three HTTP-date formats recipients must accept: IMF-fixdate, the obsolete RFC 850
/// form and asctime.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use steadfast::parse_retry_after_at;
///
/// let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
/// let later = "Sun, 06 Nov 1994 08:50:07 GMT";
/// assert_eq!(parse_retry_after_at(later, now).unwrap(), Duration::from_secs(30));
/// assert_eq!(parse_retry_after_at("Sunday, 06-Nov-94 08:50:07 GMT", now).unwrap(), Duration::from_secs(30));
/// assert_eq!(parse_retry_after_at("Sun Nov  6 08:50:07 1994", now).unwrap(), Duration::from_secs(30));
/// ```
pub fn parse_retry_after_at(value: &str, now: SystemTime) -> Result<Duration, RetryAfterError> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits, so the only possible parse failure is overflow: saturate.
        return Ok(Duration::from_secs(
            value.parse::<u64>().unwrap_or(u64::MAX),
        ));
    }
    match httpdate::parse_http_date(value) {
        Ok(at) => Ok(at.duration_since(now).unwrap_or(Duration::ZERO)),
        Err(_) => Err(RetryAfterError {
            value: value.chars().take(64).collect(),
        }),
    }
}

/// Finds and parses `Retry-After` among header name/value pairs (the name is matched without
/// regard to case). Returns `None` when the header is absent or unreadable.
///
/// ```
/// use std::time::Duration;
/// let headers = [("content-type", "application/json"), ("Retry-After", "3")];
/// assert_eq!(steadfast::retry_after_from_headers(headers), Some(Duration::from_secs(3)));
/// ```
pub fn retry_after_from_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<Duration> {
    headers
        .into_iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| parse_retry_after(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(parse_retry_after_at("0", at(0)).unwrap(), Duration::ZERO);
        assert_eq!(
            parse_retry_after_at(" 5 ", at(0)).unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            parse_retry_after_at("99999999999999999999999", at(0)).unwrap(),
            Duration::from_secs(u64::MAX)
        );
    }

    #[test]
    fn http_date_in_future_and_past() {
        // 784111777 = Sun, 06 Nov 1994 08:49:37 GMT
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(
            parse_retry_after_at(date, at(784_111_777 - 90)).unwrap(),
            Duration::from_secs(90)
        );
        assert_eq!(
            parse_retry_after_at(date, at(784_111_777 + 90)).unwrap(),
            Duration::ZERO
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "-5",
            "1.5",
            "soon",
            "Sun, 99 Nov 1994 08:49:37 GMT",
            "5s",
        ] {
            let err = parse_retry_after_at(bad, at(0)).unwrap_err();
            assert!(err.to_string().contains("invalid Retry-After"), "{bad:?}");
        }
    }

    #[test]
    fn header_lookup_ignores_case_and_bad_values() {
        assert_eq!(
            retry_after_from_headers([("RETRY-AFTER", "1")]),
            Some(Duration::from_secs(1))
        );
        assert_eq!(retry_after_from_headers([("retry-after", "later")]), None);
        assert_eq!(retry_after_from_headers([("x-retry-after", "1")]), None);
    }
}
