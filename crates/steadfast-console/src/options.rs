//! How a console is set up: where it is mounted, who may open it, what it shows.

use std::time::Duration;

/// A console's settings. The defaults are the safe ones: no admin token (so only loopback
/// `Host`s are served), job arguments hidden, a refresh every 2 s.
///
/// ```
/// use std::time::Duration;
/// use steadfast_console::ConsoleOptions;
/// let opts = ConsoleOptions::new()
///     .admin_token("correct horse battery staple")
///     .base_path("/admin/jobs")
///     .refresh(Duration::from_secs(1));
/// assert_eq!(opts.base(), "/admin/jobs");
/// ```
#[derive(Clone)]
pub struct ConsoleOptions {
    pub(crate) token: Option<String>,
    pub(crate) base: String,
    pub(crate) show_arguments: bool,
    pub(crate) refresh: Duration,
    pub(crate) any_host: bool,
    pub(crate) hosts: Vec<String>,
}

impl std::fmt::Debug for ConsoleOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleOptions")
            .field("token", &self.token.as_ref().map(|_| "[set]"))
            .field("base", &self.base)
            .field("show_arguments", &self.show_arguments)
            .field("refresh", &self.refresh)
            .field("any_host", &self.any_host)
            .field("hosts", &self.hosts)
            .finish()
    }
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsoleOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self {
            token: None,
            base: String::new(),
            show_arguments: false,
            refresh: Duration::from_secs(2),
            any_host: false,
            hosts: Vec::new(),
        }
    }

    /// Requires this admin token: every page asks for it once (a login page that sets an
    /// `HttpOnly`, `SameSite=Strict` session cookie). With a token, any `Host` is served.
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Where the router is mounted (`Router::nest`), e.g. `/admin/jobs`; links and redirects
    /// start with it. Default: the root.
    pub fn base_path(mut self, base: impl Into<String>) -> Self {
        self.base = base.into().trim_end_matches('/').to_owned();
        self
    }

    /// Show job arguments (payloads), sanitized. Off by default: arguments often carry what
    /// an operator should not read.
    pub fn show_arguments(mut self, yes: bool) -> Self {
        self.show_arguments = yes;
        self
    }

    /// How often live pages refresh (default 2 s, at least 250 ms). It also bounds the
    /// console's load on the store: each page's data is read at most once per period,
    /// however many people watch it.
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_millis(250));
        self
    }

    /// Also serve requests naming this `Host` (a name, with or without a port) when no admin
    /// token is set; without a token only `localhost`, `127.0.0.1` and `[::1]` are served,
    /// which keeps a web page from reaching the console by DNS rebinding.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into());
        self
    }

    /// The base path.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Whether an admin token is required.
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }
}
