//! Deciding whether a failure is worth another attempt.
//!
//! A retry loop is only as good as its classifier: retrying a `400 Bad Request` wastes time and
//! hides the real problem from the model, while giving up on a `503` throws away a call that would
//! have succeeded a second later. Every failure the engine sees is turned into an [`ErrorClass`]
//! — a [`ErrorKind`] that drives the decision, a stable [`ErrorCode`] for machines and models,
//! and what the failure told us (`status`, `retry_after`).
//!
//! Classification happens in this order:
//! 1. the caller's custom classifier, if any (see [`Retry::classify`](crate::Retry::classify)),
//!    which may return `None` for "no opinion";
//! 2. the error type's own [`Classify`] implementation. The built-in ones cover
//!    [`std::io::Error`], tokio's [`Elapsed`](tokio::time::error::Elapsed), [`serde_json::Error`],
//!    boxed errors (walking their `source()` chain), strings, and — with the `anyhow` feature —
//!    `anyhow::Error`.
//!
//! Your own error types classify themselves by implementing [`Classify`], usually in a few lines
//! by delegating to [`classify_chain`] or [`ErrorClass::from_status`].

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::LazyLock;
use std::time::Duration;

/// What kind of failure this is, which decides whether it is retried.
///
/// ```
/// use steadfast::ErrorKind;
/// assert!(ErrorKind::RateLimited.is_transient());
/// assert!(!ErrorKind::NonRetriable.is_transient());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// A transient failure: a 5xx, a reset connection. Retried.
    Retriable,
    /// A failure that will not change by trying again: a 4xx, a malformed argument. Not retried.
    NonRetriable,
    /// The dependency asked us to slow down (429). Retried, no sooner than its `Retry-After`.
    RateLimited,
    /// The call took too long. Retried (but see the proxy's rules for non-idempotent tools).
    Timeout,
    /// Nothing recognisable. Retried unless the policy's `retry_unknown` is off.
    Unknown,
}

impl ErrorKind {
    /// Whether this kind is known to pass: retriable, rate-limited or a timeout.
    ///
    /// `Unknown` is not transient; whether it is retried is the policy's choice
    /// ([`RetryPolicy::retry_unknown`](crate::RetryPolicy::retry_unknown)).
    ///
    /// ```
    /// use steadfast::ErrorKind;
    /// assert!(ErrorKind::Timeout.is_transient());
    /// assert!(!ErrorKind::Unknown.is_transient());
    /// ```
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Retriable | Self::RateLimited | Self::Timeout)
    }

    /// The kebab-case name used in serialized forms (`"rate-limited"`).
    ///
    /// ```
    /// assert_eq!(steadfast::ErrorKind::NonRetriable.as_str(), "non-retriable");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retriable => "retriable",
            Self::NonRetriable => "non-retriable",
            Self::RateLimited => "rate-limited",
            Self::Timeout => "timeout",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stable, machine-readable failure code such as `RATE_LIMITED`.
///
/// The built-in codes are associated constants; your own classifiers may use any other
/// `SCREAMING_SNAKE_CASE` name (`ErrorCode::new("SHARD_RELOCATING")`).
///
/// ```
/// use steadfast::ErrorCode;
/// assert_eq!(ErrorCode::RATE_LIMITED.as_str(), "RATE_LIMITED");
/// assert_eq!(ErrorCode::new("SHARD_RELOCATING").to_string(), "SHARD_RELOCATING");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(Cow<'static, str>);

impl ErrorCode {
    /// HTTP 429 or any other "slow down".
    pub const RATE_LIMITED: Self = Self::from_static("RATE_LIMITED");
    /// HTTP 5xx.
    pub const SERVER_ERROR: Self = Self::from_static("SERVER_ERROR");
    /// HTTP 4xx other than 408 and 429: the request itself is wrong.
    pub const CLIENT_ERROR: Self = Self::from_static("CLIENT_ERROR");
    /// The connection was refused, reset, aborted or broken.
    pub const NETWORK_ERROR: Self = Self::from_static("NETWORK_ERROR");
    /// A host name could not be resolved.
    pub const DNS_ERROR: Self = Self::from_static("DNS_ERROR");
    /// The call, or one attempt of it, took too long.
    pub const TIMEOUT: Self = Self::from_static("TIMEOUT");
    /// The caller cancelled the call.
    pub const CANCELLED: Self = Self::from_static("CANCELLED");
    /// A response could not be parsed (malformed JSON and the like).
    pub const PARSE_ERROR: Self = Self::from_static("PARSE_ERROR");
    /// A local I/O failure that is not about the network (file not found, permission denied).
    pub const IO_ERROR: Self = Self::from_static("IO_ERROR");
    /// Nothing more specific is known.
    pub const UNKNOWN: Self = Self::from_static("UNKNOWN");
    /// A circuit breaker refused the call without making it.
    pub const CIRCUIT_OPEN: Self = Self::from_static("CIRCUIT_OPEN");

    /// A code from a static string, usable in `const` items.
    ///
    /// ```
    /// const SHARD: steadfast::ErrorCode = steadfast::ErrorCode::from_static("SHARD_RELOCATING");
    /// assert_eq!(SHARD.as_str(), "SHARD_RELOCATING");
    /// ```
    pub const fn from_static(code: &'static str) -> Self {
        Self(Cow::Borrowed(code))
    }

    /// A code from any string.
    ///
    /// ```
    /// let code = steadfast::ErrorCode::new(format!("E{}", 42));
    /// assert_eq!(code.as_str(), "E42");
    /// ```
    pub fn new(code: impl Into<Cow<'static, str>>) -> Self {
        Self(code.into())
    }

    /// The code as text.
    ///
    /// ```
    /// assert_eq!(steadfast::ErrorCode::TIMEOUT.as_str(), "TIMEOUT");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Everything the engine knows about one failure.
///
/// `ErrorClass` also implements [`std::error::Error`], so an operation may return one directly,
/// or wrap one inside its own error chain, to say exactly how it failed:
///
/// ```
/// use std::time::Duration;
/// use steadfast::{ErrorClass, ErrorKind};
///
/// let class = ErrorClass::from_status(429).with_retry_after(Duration::from_secs(5));
/// assert_eq!(class.kind, ErrorKind::RateLimited);
/// assert_eq!(class.code.as_str(), "RATE_LIMITED");
/// assert_eq!(class.retry_after, Some(Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ErrorClass {
    /// Drives the retry decision.
    pub kind: ErrorKind,
    /// Stable code for machines and models.
    pub code: ErrorCode,
    /// The HTTP status, when the failure came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// How long the dependency asked us to wait, when it said so.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after: Option<Duration>,
    /// A short description of the failure. Not sanitized: pass it through the sanitizer before
    /// it reaches a model or a log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Cow<'static, str>>,
    /// Overrides whether this failure counts against a circuit breaker; `None` follows the rule
    /// of [`counts_as_breaker_failure`](Self::counts_as_breaker_failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_failure: Option<bool>,
}

impl ErrorClass {
    /// A class with the given kind and code, and nothing else known.
    ///
    /// ```
    /// use steadfast::{ErrorClass, ErrorCode, ErrorKind};
    /// let c = ErrorClass::new(ErrorKind::Retriable, ErrorCode::new("SHARD_RELOCATING"));
    /// assert!(c.status.is_none() && c.retry_after.is_none());
    /// ```
    pub const fn new(kind: ErrorKind, code: ErrorCode) -> Self {
        Self {
            kind,
            code,
            status: None,
            retry_after: None,
            message: None,
            breaker_failure: None,
        }
    }

    /// Whether this failure counts against a circuit breaker.
    ///
    /// Only infrastructure failures do: transient kinds (retriable, rate-limited, timeout). A
    /// non-retriable caller error (400, 404, invalid arguments) proves the dependency is up and
    /// answering, and an unrecognised failure proves nothing, so neither counts. A classifier can
    /// override this per failure with [`with_breaker_failure`](Self::with_breaker_failure).
    ///
    /// ```
    /// use steadfast::ErrorClass;
    /// assert!(ErrorClass::from_status(503).counts_as_breaker_failure());
    /// assert!(!ErrorClass::from_status(404).counts_as_breaker_failure());
    /// assert!(ErrorClass::from_status(404).with_breaker_failure(true).counts_as_breaker_failure());
    /// ```
    pub fn counts_as_breaker_failure(&self) -> bool {
        self.breaker_failure.unwrap_or(self.kind.is_transient())
    }

    /// Sets whether this failure counts against a circuit breaker.
    ///
    /// ```
    /// let c = steadfast::ErrorClass::from_status(500).with_breaker_failure(false);
    /// assert!(!c.counts_as_breaker_failure());
    /// ```
    pub fn with_breaker_failure(mut self, counts: bool) -> Self {
        self.breaker_failure = Some(counts);
        self
    }

    /// A transient failure with the given code.
    ///
    /// ```
    /// let c = steadfast::ErrorClass::retriable(steadfast::ErrorCode::SERVER_ERROR);
    /// assert_eq!(c.kind, steadfast::ErrorKind::Retriable);
    /// ```
    pub const fn retriable(code: ErrorCode) -> Self {
        Self::new(ErrorKind::Retriable, code)
    }

    /// A permanent failure with the given code.
    ///
    /// ```
    /// let c = steadfast::ErrorClass::non_retriable(steadfast::ErrorCode::CLIENT_ERROR);
    /// assert_eq!(c.kind, steadfast::ErrorKind::NonRetriable);
    /// ```
    pub const fn non_retriable(code: ErrorCode) -> Self {
        Self::new(ErrorKind::NonRetriable, code)
    }

    /// A timeout (`TIMEOUT`, kind [`ErrorKind::Timeout`]).
    ///
    /// ```
    /// assert_eq!(steadfast::ErrorClass::timeout().code.as_str(), "TIMEOUT");
    /// ```
    pub const fn timeout() -> Self {
        Self::new(ErrorKind::Timeout, ErrorCode::TIMEOUT)
    }

    /// A cancellation (`CANCELLED`): never retried.
    ///
    /// ```
    /// assert!(!steadfast::ErrorClass::cancelled().kind.is_transient());
    /// ```
    pub const fn cancelled() -> Self {
        Self::new(ErrorKind::NonRetriable, ErrorCode::CANCELLED)
    }

    /// Nothing recognisable (`UNKNOWN`).
    ///
    /// ```
    /// assert_eq!(steadfast::ErrorClass::unknown().kind, steadfast::ErrorKind::Unknown);
    /// ```
    pub const fn unknown() -> Self {
        Self::new(ErrorKind::Unknown, ErrorCode::UNKNOWN)
    }

    /// Classifies an HTTP status code.
    ///
    /// | status | kind | code |
    /// |---|---|---|
    /// | 408 | timeout | `TIMEOUT` |
    /// | 429 | rate-limited | `RATE_LIMITED` |
    /// | other 4xx (400, 401, 403, 404, 405, 409, 422, …) | non-retriable | `CLIENT_ERROR` |
    /// | 5xx (500, 502, 503, 504, …) | retriable | `SERVER_ERROR` |
    /// | anything else | unknown | `UNKNOWN` |
    ///
    /// ```
    /// use steadfast::{ErrorClass, ErrorKind};
    /// assert_eq!(ErrorClass::from_status(503).kind, ErrorKind::Retriable);
    /// assert_eq!(ErrorClass::from_status(404).kind, ErrorKind::NonRetriable);
    /// assert_eq!(ErrorClass::from_status(503).status, Some(503));
    /// ```
    pub fn from_status(status: u16) -> Self {
        let class = match status {
            408 => Self::timeout(),
            429 => Self::new(ErrorKind::RateLimited, ErrorCode::RATE_LIMITED),
            400..=499 => Self::non_retriable(ErrorCode::CLIENT_ERROR),
            500..=599 => Self::retriable(ErrorCode::SERVER_ERROR),
            _ => Self::unknown(),
        };
        class.with_status(status)
    }

    /// Classifies an HTTP response from its status and its `Retry-After` header value, if any.
    /// An unparseable header is ignored (the status still classifies the response).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = steadfast::ErrorClass::from_response(429, Some("7"));
    /// assert_eq!(c.retry_after, Some(Duration::from_secs(7)));
    /// ```
    pub fn from_response(status: u16, retry_after: Option<&str>) -> Self {
        let class = Self::from_status(status);
        match retry_after.and_then(|v| crate::retry_after::parse_retry_after(v).ok()) {
            Some(after) => class.with_retry_after(after),
            None => class,
        }
    }

    /// Sets the HTTP status.
    ///
    /// ```
    /// let c = steadfast::ErrorClass::unknown().with_status(418);
    /// assert_eq!(c.status, Some(418));
    /// ```
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets how long the dependency asked us to wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = steadfast::ErrorClass::from_status(503).with_retry_after(Duration::from_secs(2));
    /// assert_eq!(c.retry_after, Some(Duration::from_secs(2)));
    /// ```
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Sets the description.
    ///
    /// ```
    /// let c = steadfast::ErrorClass::unknown().with_message("index rebuilding");
    /// assert_eq!(c.message.as_deref(), Some("index rebuilding"));
    /// ```
    pub fn with_message(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.message = Some(message.into());
        self
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.code, self.kind)?;
        if let Some(status) = self.status {
            write!(f, ", status {status}")?;
        }
        if let Some(after) = self.retry_after {
            write!(f, ", retry after {}", humantime::format_duration(after))?;
        }
        f.write_str(")")?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl StdError for ErrorClass {}

/// An error type that knows how it failed.
///
/// The engine requires the operation's error type to implement this (a custom classifier, set
/// with [`Retry::classify`](crate::Retry::classify), is consulted first). Implement it for your
/// own errors; [`classify_chain`] does the work for anything that implements
/// [`std::error::Error`]:
///
/// ```
/// use steadfast::{Classify, ErrorClass, ErrorKind};
///
/// #[derive(Debug)]
/// enum ApiError { Status(u16), Io(std::io::Error) }
/// # impl std::fmt::Display for ApiError {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "api error") }
/// # }
/// # impl std::error::Error for ApiError {}
///
/// impl Classify for ApiError {
///     fn classify(&self) -> ErrorClass {
///         match self {
///             ApiError::Status(s) => ErrorClass::from_status(*s),
///             ApiError::Io(e) => e.classify(),
///         }
///     }
/// }
///
/// assert_eq!(ApiError::Status(502).classify().kind, ErrorKind::Retriable);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `steadfast::Classify`, so the engine cannot tell a transient failure from a permanent one",
    label = "the operation's error type must implement `Classify`",
    note = "for `anyhow::Error`, enable steadfast's `anyhow` feature: `steadfast = {{ version = \"…\", features = [\"anyhow\"] }}`",
    note = "for your own error type, implement `Classify`; `steadfast::classify_chain(self)` classifies any `std::error::Error` by its source chain",
    note = "or map the error into one that classifies itself (`std::io::Error`, `steadfast::ErrorClass`, `String`, `Box<dyn Error + Send + Sync>`)"
)]
pub trait Classify {
    /// How this failure should be treated.
    fn classify(&self) -> ErrorClass;

    /// This failure as a [`std::error::Error`], if it is one: what
    /// [`RetryError::source`](std::error::Error::source) returns for it. Override it with
    /// `Some(self)` for your own error types so error reporters can walk the chain; the
    /// built-in impls (`io::Error`, `serde_json::Error`, `anyhow::Error`, boxed errors…) do.
    ///
    /// ```
    /// use std::error::Error;
    /// use steadfast::{Classify, ErrorClass, RetryPolicy};
    ///
    /// #[derive(Debug)]
    /// struct Busy;
    /// impl std::fmt::Display for Busy {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("busy") }
    /// }
    /// impl Error for Busy {}
    /// impl Classify for Busy {
    ///     fn classify(&self) -> ErrorClass { ErrorClass::from_status(503) }
    ///     fn as_error(&self) -> Option<&(dyn Error + 'static)> { Some(self) }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let err = steadfast::retry(&RetryPolicy::default(), async |_| Err::<(), _>(Busy)).await.unwrap_err();
    /// assert_eq!(err.source().unwrap().to_string(), "busy");
    /// # }
    /// ```
    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        None
    }
}

impl Classify for ErrorClass {
    fn classify(&self) -> ErrorClass {
        self.clone()
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}

impl Classify for io::Error {
    /// Network failures are retriable, `TimedOut` is a timeout, local failures (not found,
    /// permission denied, invalid input) are not retriable. Resolver failures, which std reports
    /// without a specific kind, are recognised by their message as `DNS_ERROR`.
    fn classify(&self) -> ErrorClass {
        // An io::Error may itself wrap a classified error (io::Error::other(ErrorClass …)).
        if let Some(inner) = self.get_ref()
            && let Some(class) = known_error(inner)
        {
            return class;
        }
        let by_kind = self.kind().classify();
        if by_kind.kind != ErrorKind::Unknown {
            return by_kind;
        }
        classify_message(&self.to_string()).unwrap_or(by_kind)
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}

impl Classify for io::ErrorKind {
    fn classify(&self) -> ErrorClass {
        use io::ErrorKind as K;
        let (class, message) = match self {
            K::ConnectionRefused => (network(), "connection refused"),
            K::ConnectionReset => (network(), "connection reset"),
            K::ConnectionAborted => (network(), "connection aborted"),
            K::BrokenPipe => (network(), "broken pipe"),
            K::NotConnected => (network(), "not connected"),
            K::UnexpectedEof => (network(), "connection closed unexpectedly"),
            K::NetworkUnreachable => (network(), "network unreachable"),
            K::HostUnreachable => (network(), "host unreachable"),
            K::NetworkDown => (network(), "network down"),
            K::AddrNotAvailable => (network(), "address not available"),
            K::TimedOut => (ErrorClass::timeout(), "timed out"),
            K::Interrupted => (ErrorClass::retriable(ErrorCode::IO_ERROR), "interrupted"),
            K::WouldBlock => (
                ErrorClass::retriable(ErrorCode::IO_ERROR),
                "operation would block",
            ),
            K::ResourceBusy => (ErrorClass::retriable(ErrorCode::IO_ERROR), "resource busy"),
            K::NotFound => (local(), "not found"),
            K::PermissionDenied => (local(), "permission denied"),
            K::AlreadyExists => (local(), "already exists"),
            K::InvalidInput => (local(), "invalid input"),
            K::InvalidData => (
                ErrorClass::non_retriable(ErrorCode::PARSE_ERROR),
                "invalid data",
            ),
            K::Unsupported => (local(), "unsupported"),
            K::OutOfMemory => (local(), "out of memory"),
            _ => return ErrorClass::unknown(),
        };
        class.with_message(message)
    }
}

fn network() -> ErrorClass {
    ErrorClass::retriable(ErrorCode::NETWORK_ERROR)
}

fn local() -> ErrorClass {
    ErrorClass::non_retriable(ErrorCode::IO_ERROR)
}

impl Classify for tokio::time::error::Elapsed {
    fn classify(&self) -> ErrorClass {
        ErrorClass::timeout().with_message("deadline elapsed")
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}

impl Classify for serde_json::Error {
    /// Malformed JSON is not retriable (the same bytes parse the same way); an I/O failure while
    /// reading is classified as that I/O failure.
    fn classify(&self) -> ErrorClass {
        match self.io_error_kind() {
            Some(kind) => kind.classify(),
            None => ErrorClass::non_retriable(ErrorCode::PARSE_ERROR).with_message("invalid JSON"),
        }
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}

impl Classify for Box<dyn StdError + Send + Sync + 'static> {
    fn classify(&self) -> ErrorClass {
        classify_chain(self.as_ref())
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.as_ref())
    }
}

impl Classify for Box<dyn StdError + 'static> {
    fn classify(&self) -> ErrorClass {
        classify_chain(self.as_ref())
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.as_ref())
    }
}

/// With the `anyhow` feature: `anyhow::Error` classifies by its chain, and a
/// `RetryError<anyhow::Error>` converts into `anyhow::Error` with `?`.
///
/// ```
/// # #[cfg(feature = "anyhow")] {
/// use steadfast::RetryPolicy;
///
/// async fn fetch() -> anyhow::Result<u32> {
///     let n = steadfast::retry(&RetryPolicy::no_retry(), async |_| {
///         Err::<u32, _>(anyhow::anyhow!("HTTP 404 from the API"))
///     })
///     .await?; // RetryError<anyhow::Error> into anyhow::Error
///     Ok(n)
/// }
/// # let err = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(fetch()).unwrap_err();
/// # assert!(err.to_string().starts_with("gave up after 1 attempt"));
/// # assert_eq!(err.chain().nth(1).unwrap().to_string(), "HTTP 404 from the API");
/// # }
/// ```
#[cfg(feature = "anyhow")]
impl Classify for anyhow::Error {
    fn classify(&self) -> ErrorClass {
        classify_chain(self.as_ref())
    }

    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.as_ref())
    }
}

impl Classify for String {
    /// Recognises common failure phrases ("HTTP 503", "rate limit", "timed out", "connection
    /// reset", …); anything else is `UNKNOWN`.
    fn classify(&self) -> ErrorClass {
        self.as_str().classify()
    }
}

impl Classify for &str {
    fn classify(&self) -> ErrorClass {
        classify_message(self).unwrap_or_else(ErrorClass::unknown)
    }
}

impl Classify for std::convert::Infallible {
    fn classify(&self) -> ErrorClass {
        match *self {}
    }
}

/// Classifies any error by walking its `source()` chain, outermost first.
///
/// The first link that is an [`ErrorClass`], an [`io::Error`], a tokio `Elapsed` or a
/// [`serde_json::Error`] decides. If none is, the outermost error's message is read for common
/// failure phrases (see [`classify_message`]); failing that, the error is `UNKNOWN`.
///
/// ```
/// use std::io;
/// use steadfast::{classify_chain, ErrorKind};
///
/// #[derive(Debug)]
/// struct Wrapper(io::Error);
/// impl std::fmt::Display for Wrapper {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("fetch failed") }
/// }
/// impl std::error::Error for Wrapper {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(&self.0) }
/// }
///
/// let err = Wrapper(io::Error::from(io::ErrorKind::ConnectionReset));
/// assert_eq!(classify_chain(&err).code.as_str(), "NETWORK_ERROR");
/// ```
pub fn classify_chain(err: &(dyn StdError + 'static)) -> ErrorClass {
    let mut link = Some(err);
    while let Some(e) = link {
        if let Some(class) = known_error(e) {
            return class;
        }
        link = e.source();
    }
    classify_message(&err.to_string()).unwrap_or_else(ErrorClass::unknown)
}

/// The classification of `e` itself, if it is one of the error types the crate knows.
fn known_error(e: &(dyn StdError + 'static)) -> Option<ErrorClass> {
    if let Some(c) = e.downcast_ref::<ErrorClass>() {
        return Some(c.clone());
    }
    if let Some(io) = e.downcast_ref::<io::Error>() {
        let class = io.classify();
        // An io::Error of an unrecognised kind (Other) usually wraps a more telling source.
        return (class.kind != ErrorKind::Unknown).then_some(class);
    }
    if let Some(t) = e.downcast_ref::<tokio::time::error::Elapsed>() {
        return Some(t.classify());
    }
    if let Some(j) = e.downcast_ref::<serde_json::Error>() {
        return Some(Classify::classify(j));
    }
    None
}

/// The patterns behind [`classify_message`], in priority order: an explicit status wins over a
/// phrase, and "rate limit" wins over "timeout" ("rate limit window timed out" is a rate limit).
static STATUS: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:http(?:/[0-9.]+)?|status(?:[ _]?code)?|error|code|response)\b[\s:=#(\[]*([45][0-9]{2})\b",
    )
    .expect("status pattern is valid")
});

struct Phrase {
    needles: &'static [&'static str],
    class: fn() -> ErrorClass,
}

const PHRASES: &[Phrase] = &[
    Phrase {
        needles: &[
            "rate limit",
            "rate-limit",
            "ratelimit",
            "too many requests",
            "throttl",
        ],
        class: || ErrorClass::new(ErrorKind::RateLimited, ErrorCode::RATE_LIMITED),
    },
    Phrase {
        needles: &[
            "enotfound",
            "eai_again",
            "name or service not known",
            "failed to lookup address",
            "temporary failure in name resolution",
            "nodename nor servname",
            "dns error",
        ],
        class: || ErrorClass::retriable(ErrorCode::DNS_ERROR),
    },
    Phrase {
        needles: &["timed out", "timeout", "deadline exceeded", "etimedout"],
        class: ErrorClass::timeout,
    },
    Phrase {
        needles: &[
            "connection refused",
            "connection reset",
            "connection aborted",
            "connection closed",
            "broken pipe",
            "econnrefused",
            "econnreset",
            "epipe",
            "network is unreachable",
            "transport closed",
        ],
        class: network,
    },
    Phrase {
        needles: &[
            "service unavailable",
            "temporarily unavailable",
            "bad gateway",
            "internal server error",
            "try again later",
            "overloaded",
        ],
        class: || ErrorClass::retriable(ErrorCode::SERVER_ERROR),
    },
    // Last: "parse error: connection reset" is about the connection. A body that does not
    // parse comes back the same way when retried (the MCP retry guide: never retry it).
    Phrase {
        needles: &[
            "parse error",
            "json parse",
            "failed to parse",
            "could not parse",
            "unable to parse",
            "unexpected token",
            "unexpected end of json",
            "invalid json",
            "malformed json",
            "is not valid json",
            "syntaxerror",
            "expected value at line",
            "error decoding response body",
        ],
        class: || {
            ErrorClass::non_retriable(ErrorCode::PARSE_ERROR).with_message("malformed response")
        },
    },
];

/// Classifies free text: an error message, or the text of an MCP tool result with `isError`.
///
/// Recognises an HTTP status written next to `HTTP`, `status`, `code` or `error` (`"HTTP 503"`,
/// `"status code: 429"`), then common phrases: rate limits, DNS failures, timeouts, connection
/// failures, "temporarily unavailable", and — not retriable — parse errors ("JSON parse error:
/// Unexpected token <"). Returns `None` when nothing is recognised — a plain
/// business failure such as "file not found" says nothing about the transport.
///
/// ```
/// use steadfast::{classify_message, ErrorKind};
/// assert_eq!(classify_message("upstream returned HTTP 503").unwrap().kind, ErrorKind::Retriable);
/// assert_eq!(classify_message("Rate limit exceeded").unwrap().kind, ErrorKind::RateLimited);
/// assert_eq!(classify_message("status: 404").unwrap().kind, ErrorKind::NonRetriable);
/// assert_eq!(classify_message("JSON parse error: Unexpected token <").unwrap().kind, ErrorKind::NonRetriable);
/// assert!(classify_message("no such user: alice").is_none());
/// ```
pub fn classify_message(text: &str) -> Option<ErrorClass> {
    if let Some(status) = STATUS
        .captures(text)
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse::<u16>().ok())
    {
        return Some(ErrorClass::from_status(status));
    }
    PHRASES
        .iter()
        .find(|p| p.needles.iter().any(|n| contains_ignore_case(text, n)))
        .map(|p| (p.class)())
}

/// `haystack.to_lowercase().contains(needle)` without allocating; `needle` is lowercase ASCII.
fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    n.len() <= h.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        let rows: &[(u16, ErrorKind, &str)] = &[
            (400, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (401, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (403, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (404, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (405, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (409, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (422, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (418, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (451, ErrorKind::NonRetriable, "CLIENT_ERROR"),
            (408, ErrorKind::Timeout, "TIMEOUT"),
            (429, ErrorKind::RateLimited, "RATE_LIMITED"),
            (500, ErrorKind::Retriable, "SERVER_ERROR"),
            (502, ErrorKind::Retriable, "SERVER_ERROR"),
            (503, ErrorKind::Retriable, "SERVER_ERROR"),
            (504, ErrorKind::Retriable, "SERVER_ERROR"),
            (507, ErrorKind::Retriable, "SERVER_ERROR"),
            (599, ErrorKind::Retriable, "SERVER_ERROR"),
            (200, ErrorKind::Unknown, "UNKNOWN"),
            (302, ErrorKind::Unknown, "UNKNOWN"),
        ];
        for &(status, kind, code) in rows {
            let c = ErrorClass::from_status(status);
            assert_eq!((c.kind, c.code.as_str()), (kind, code), "status {status}");
            assert_eq!(c.status, Some(status));
        }
    }

    #[test]
    fn io_kind_table() {
        use io::ErrorKind as K;
        let rows: &[(K, ErrorKind, &str)] = &[
            (K::ConnectionRefused, ErrorKind::Retriable, "NETWORK_ERROR"),
            (K::ConnectionReset, ErrorKind::Retriable, "NETWORK_ERROR"),
            (K::ConnectionAborted, ErrorKind::Retriable, "NETWORK_ERROR"),
            (K::BrokenPipe, ErrorKind::Retriable, "NETWORK_ERROR"),
            (K::NotConnected, ErrorKind::Retriable, "NETWORK_ERROR"),
            (K::UnexpectedEof, ErrorKind::Retriable, "NETWORK_ERROR"),
            (K::TimedOut, ErrorKind::Timeout, "TIMEOUT"),
            (K::Interrupted, ErrorKind::Retriable, "IO_ERROR"),
            (K::NotFound, ErrorKind::NonRetriable, "IO_ERROR"),
            (K::PermissionDenied, ErrorKind::NonRetriable, "IO_ERROR"),
            (K::InvalidInput, ErrorKind::NonRetriable, "IO_ERROR"),
            (K::InvalidData, ErrorKind::NonRetriable, "PARSE_ERROR"),
            (K::Other, ErrorKind::Unknown, "UNKNOWN"),
        ];
        for &(k, kind, code) in rows {
            let c = io::Error::from(k).classify();
            assert_eq!((c.kind, c.code.as_str()), (kind, code), "{k:?}");
        }
    }

    #[test]
    fn dns_failure_from_resolver_message() {
        let e = io::Error::other("failed to lookup address information: Name or service not known");
        let c = e.classify();
        assert_eq!(
            (c.kind, c.code.as_str()),
            (ErrorKind::Retriable, "DNS_ERROR")
        );
    }

    #[test]
    fn io_error_wrapping_a_class_uses_it() {
        let e = io::Error::other(ErrorClass::from_status(429));
        assert_eq!(e.classify().kind, ErrorKind::RateLimited);
    }

    #[tokio::test]
    async fn tokio_elapsed_is_timeout() {
        let elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(elapsed.classify().code, ErrorCode::TIMEOUT);
        let boxed: Box<dyn StdError + Send + Sync> = Box::new(elapsed);
        assert_eq!(boxed.classify().kind, ErrorKind::Timeout);
    }

    #[test]
    fn json_parse_errors_are_not_retriable() {
        let e = serde_json::from_str::<serde_json::Value>("{not json").unwrap_err();
        let c = Classify::classify(&e);
        assert_eq!(
            (c.kind, c.code.as_str()),
            (ErrorKind::NonRetriable, "PARSE_ERROR")
        );
    }

    #[test]
    fn json_io_errors_classify_as_io() {
        struct Reset;
        impl io::Read for Reset {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::ErrorKind::ConnectionReset.into())
            }
        }
        let e = serde_json::from_reader::<_, serde_json::Value>(Reset).unwrap_err();
        assert_eq!(Classify::classify(&e).code, ErrorCode::NETWORK_ERROR);
    }

    #[derive(Debug)]
    struct Context(&'static str, Box<dyn StdError + Send + Sync>);
    impl fmt::Display for Context {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl StdError for Context {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(self.1.as_ref())
        }
    }

    #[test]
    fn chain_walk_finds_nested_errors() {
        let inner = io::Error::from(io::ErrorKind::ConnectionRefused);
        let err: Box<dyn StdError + Send + Sync> = Box::new(Context(
            "outer",
            Box::new(Context("middle", Box::new(inner))),
        ));
        assert_eq!(err.classify().code, ErrorCode::NETWORK_ERROR);
    }

    #[test]
    fn chain_walk_prefers_the_outermost_known_link() {
        let inner = io::Error::from(io::ErrorKind::ConnectionRefused);
        let err = Context(
            "ctx",
            Box::new(io::Error::other(Context("x", Box::new(inner)))),
        );
        // io::Error::other has kind Other, so the walk goes past it to the refused connection.
        assert_eq!(classify_chain(&err).code, ErrorCode::NETWORK_ERROR);
        let explicit = Context("ctx", Box::new(ErrorClass::from_status(404)));
        assert_eq!(classify_chain(&explicit).kind, ErrorKind::NonRetriable);
    }

    #[test]
    fn chain_walk_falls_back_to_message_then_unknown() {
        let err = Context("upstream said: HTTP 502 Bad Gateway", Box::new(Fmt("x")));
        assert_eq!(classify_chain(&err).status, Some(502));
        let err = Context("the answer was 42", Box::new(Fmt("x")));
        assert_eq!(classify_chain(&err), ErrorClass::unknown());
    }

    #[derive(Debug)]
    struct Fmt(&'static str);
    impl fmt::Display for Fmt {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl StdError for Fmt {}

    #[cfg(feature = "anyhow")]
    #[test]
    fn anyhow_chain() {
        let err =
            anyhow::Error::new(io::Error::from(io::ErrorKind::TimedOut)).context("calling search");
        assert_eq!(err.classify().kind, ErrorKind::Timeout);
    }

    #[test]
    fn message_table() {
        let rows: &[(&str, Option<(ErrorKind, &str)>)] = &[
            ("HTTP 503", Some((ErrorKind::Retriable, "SERVER_ERROR"))),
            (
                "HTTP/1.1 429 Too Many Requests",
                Some((ErrorKind::RateLimited, "RATE_LIMITED")),
            ),
            (
                "request failed with status code 400",
                Some((ErrorKind::NonRetriable, "CLIENT_ERROR")),
            ),
            (
                "status=401 unauthorized",
                Some((ErrorKind::NonRetriable, "CLIENT_ERROR")),
            ),
            (
                "Error 504: gateway",
                Some((ErrorKind::Retriable, "SERVER_ERROR")),
            ),
            (
                "you hit the rate limit; timed out waiting",
                Some((ErrorKind::RateLimited, "RATE_LIMITED")),
            ),
            (
                "Request timed out after 30s",
                Some((ErrorKind::Timeout, "TIMEOUT")),
            ),
            ("ECONNRESET", Some((ErrorKind::Retriable, "NETWORK_ERROR"))),
            (
                "getaddrinfo ENOTFOUND api.example.com",
                Some((ErrorKind::Retriable, "DNS_ERROR")),
            ),
            (
                "Service Temporarily Unavailable",
                Some((ErrorKind::Retriable, "SERVER_ERROR")),
            ),
            ("file not found: /tmp/x", None),
            ("we sold 503 units", None),
            ("", None),
        ];
        for &(text, want) in rows {
            let got = classify_message(text).map(|c| (c.kind, c.code.as_str().to_owned()));
            let want = want.map(|(k, c)| (k, c.to_owned()));
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn strings_default_to_unknown() {
        assert_eq!("boom".classify(), ErrorClass::unknown());
        assert_eq!(String::from("HTTP 500").classify().status, Some(500));
    }

    #[test]
    fn display_reads_well() {
        let c = ErrorClass::from_status(429)
            .with_retry_after(Duration::from_secs(5))
            .with_message("slow down");
        assert_eq!(
            c.to_string(),
            "RATE_LIMITED (rate-limited, status 429, retry after 5s): slow down"
        );
    }

    #[test]
    fn serde_round_trip() {
        let c = ErrorClass::from_status(503).with_retry_after(Duration::from_millis(1500));
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"retriable","code":"SERVER_ERROR","status":503,"retry_after":"1s 500ms"}"#
        );
        assert_eq!(serde_json::from_str::<ErrorClass>(&json).unwrap(), c);
    }
}
