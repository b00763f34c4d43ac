//! Who may use a console, and which requests it trusts: the `Host` allowlist, admin-token
//! sessions, CSRF tokens and the `Origin` check. Shared by every console router (the jobs
//! console and the gateway's admin listener), so each gets the same rules.
//!
//! * Without an admin token only loopback `Host`s are served (a page elsewhere cannot reach
//!   a console on 127.0.0.1 by DNS rebinding: its requests would name the attacker's host).
//! * With one, every page but the login page needs a session cookie (`HttpOnly`,
//!   `SameSite=Strict`) that the login page sets for the right token.
//! * Every state-changing request is a POST carrying the session's CSRF token, and its
//!   `Origin` (or, lacking one, `Referer`) must be the console's own.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, header};
use sha2::{Digest, Sha256};

use crate::options::ConsoleOptions;

/// The session cookie's name.
pub const COOKIE: &str = "steadfast_console";
/// How long a session lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Most sessions kept; the oldest go first.
const MAX_SESSIONS: usize = 10_000;

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its `Host` is not one this console answers to.
    Host,
    /// No valid session (an admin token is required).
    Login,
    /// A POST from another origin, or without `Origin` and `Referer`.
    Origin,
    /// A POST without this session's CSRF token.
    Csrf,
}

impl Refusal {
    /// What the refusal page says.
    pub fn message(self) -> &'static str {
        match self {
            Self::Host => "this console does not answer to that Host name",
            Self::Login => "log in first",
            Self::Origin => "refused: the request came from another origin",
            Self::Csrf => "refused: the form's CSRF token is missing or wrong (reload the page)",
        }
    }
}

/// The security state of one console: its secret, its sessions, its rules.
pub struct Security {
    secret: [u8; 32],
    token_digest: Option<[u8; 32]>,
    sessions: Mutex<HashMap<String, Instant>>,
    any_host: bool,
    hosts: Vec<String>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security").finish_non_exhaustive()
    }
}

/// Who a request is, once let in: what its forms must carry.
#[derive(Debug, Clone)]
pub struct Visitor {
    /// The CSRF token its forms carry.
    pub csrf: String,
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    // The OS generator failing leaves nothing safe to run on.
    getrandom::fill(&mut b).expect("the operating system's random number generator");
    b
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Security {
    /// The rules of `opts`, with a fresh secret (sessions end when the process does).
    pub fn new(opts: &ConsoleOptions) -> Self {
        Self {
            secret: random32(),
            token_digest: opts.token.as_deref().map(|t| digest(&[t.as_bytes()])),
            sessions: Mutex::new(HashMap::new()),
            any_host: opts.any_host || opts.token.is_some(),
            hosts: opts.hosts.clone(),
        }
    }

    /// Whether an admin token is required.
    pub fn requires_login(&self) -> bool {
        self.token_digest.is_some()
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        if self.any_host {
            return true;
        }
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let name = strip_port(host);
        matches!(name, "localhost" | "127.0.0.1" | "[::1]")
            || self
                .hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn session_of(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers, COOKIE)?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        match sessions.get(&id) {
            Some(started) if started.elapsed() < SESSION_TTL => Some(id),
            Some(_) => {
                sessions.remove(&id);
                None
            }
            None => None,
        }
    }

    fn csrf_for(&self, session: &str) -> String {
        hex(&digest(&[&self.secret, b"csrf", session.as_bytes()])[..16])
    }

    /// Checks a request's `Host` and session (the login page and assets need no session), and
    /// for a POST its `Origin`.
    pub fn admit(
        &self,
        method: &Method,
        headers: &HeaderMap,
        public: bool,
    ) -> Result<Visitor, Refusal> {
        if !self.host_ok(headers) {
            return Err(Refusal::Host);
        }
        if *method != Method::GET && *method != Method::HEAD && !same_origin(headers) {
            return Err(Refusal::Origin);
        }
        let session = if self.requires_login() {
            match self.session_of(headers) {
                Some(s) => s,
                None if public => String::new(),
                None => return Err(Refusal::Login),
            }
        } else {
            String::new()
        };
        Ok(Visitor {
            csrf: self.csrf_for(&session),
        })
    }

    /// Checks a scrape (`/metrics`, a GET without a browser): the `Host` rule, and with an
    /// admin token either a session or `Authorization: Bearer <the admin token>`.
    pub fn admit_scrape(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if !self.host_ok(headers) {
            return Err(Refusal::Host);
        }
        let Some(want) = self.token_digest else {
            return Ok(());
        };
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match bearer {
            Some(t) if same(&digest(&[t.trim().as_bytes()]), &want) => Ok(()),
            _ if self.session_of(headers).is_some() => Ok(()),
            _ => Err(Refusal::Login),
        }
    }

    /// Checks a form's CSRF token against the visitor's.
    pub fn check_csrf(&self, visitor: &Visitor, sent: Option<&str>) -> Result<(), Refusal> {
        match sent {
            Some(s) if same(s.as_bytes(), visitor.csrf.as_bytes()) => Ok(()),
            _ => Err(Refusal::Csrf),
        }
    }

    /// Starts a session if `token` is the admin token; returns its cookie's id.
    pub fn login(&self, token: &str) -> Option<String> {
        let want = self.token_digest?;
        if !same(&digest(&[token.as_bytes()]), &want) {
            return None;
        }
        let id = hex(&random32());
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, t| t.elapsed() < SESSION_TTL);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(id.clone(), Instant::now());
        Some(id)
    }

    /// Ends the session of a request.
    pub fn logout(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, COOKIE) {
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        }
    }
}

/// The `Set-Cookie` value of a session (`path` is the console's base, or `/`).
pub fn session_cookie(id: &str, path: &str) -> String {
    let path = if path.is_empty() { "/" } else { path };
    format!("{COOKIE}={id}; Path={path}; HttpOnly; SameSite=Strict; Max-Age=43200")
}

/// The `Set-Cookie` value that ends a session.
pub fn cleared_cookie(path: &str) -> String {
    let path = if path.is_empty() { "/" } else { path };
    format!("{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0")
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The request's `Origin` (else `Referer`) names the host it was sent to.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let from = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok());
    let Some(from) = from else { return false };
    let Some(rest) = from
        .strip_prefix("http://")
        .or_else(|| from.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    authority.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn loopback_hosts_only_without_a_token() {
        let s = Security::new(&ConsoleOptions::new());
        let get = Method::GET;
        for ok in ["localhost:8080", "127.0.0.1:1", "[::1]:9", "localhost"] {
            assert!(
                s.admit(&get, &headers(&[("host", ok)]), false).is_ok(),
                "{ok}"
            );
        }
        for bad in ["evil.example:8080", "10.0.0.1", "localhost.evil.example"] {
            let r = s.admit(&get, &headers(&[("host", bad)]), false);
            assert_eq!(r.unwrap_err(), Refusal::Host, "{bad}");
        }
        assert_eq!(
            s.admit(&get, &HeaderMap::new(), false).unwrap_err(),
            Refusal::Host
        );
        let s = Security::new(&ConsoleOptions::new().allow_host("jobs.internal"));
        assert!(
            s.admit(&get, &headers(&[("host", "jobs.internal:80")]), false)
                .is_ok()
        );
    }

    #[test]
    fn posts_need_their_own_origin() {
        let s = Security::new(&ConsoleOptions::new());
        let post = Method::POST;
        let ok = headers(&[("host", "127.0.0.1:9"), ("origin", "http://127.0.0.1:9")]);
        assert!(s.admit(&post, &ok, false).is_ok());
        let by_referer = headers(&[("host", "127.0.0.1:9"), ("referer", "http://127.0.0.1:9/x")]);
        assert!(s.admit(&post, &by_referer, false).is_ok());
        for bad in [
            headers(&[("host", "127.0.0.1:9"), ("origin", "http://evil.example")]),
            headers(&[("host", "127.0.0.1:9"), ("origin", "http://127.0.0.1:10")]),
            headers(&[("host", "127.0.0.1:9"), ("origin", "null")]),
            headers(&[("host", "127.0.0.1:9")]),
        ] {
            assert_eq!(s.admit(&post, &bad, false).unwrap_err(), Refusal::Origin);
        }
    }

    #[test]
    fn token_sessions_and_csrf() {
        let s = Security::new(&ConsoleOptions::new().admin_token("sesame"));
        let get = Method::GET;
        let anon = headers(&[("host", "jobs.example")]);
        assert_eq!(s.admit(&get, &anon, false).unwrap_err(), Refusal::Login);
        let login_page = s.admit(&get, &anon, true).unwrap();
        assert!(s.login("wrong").is_none());
        let id = s.login("sesame").unwrap();
        let cookie = format!("other=1; {COOKIE}={id}");
        let me = s
            .admit(
                &get,
                &headers(&[("host", "jobs.example"), ("cookie", &cookie)]),
                false,
            )
            .unwrap();
        assert_ne!(
            me.csrf, login_page.csrf,
            "a session's CSRF token is its own"
        );
        assert!(s.check_csrf(&me, Some(&me.csrf)).is_ok());
        assert_eq!(s.check_csrf(&me, None).unwrap_err(), Refusal::Csrf);
        assert_eq!(
            s.check_csrf(&me, Some(&login_page.csrf)).unwrap_err(),
            Refusal::Csrf
        );
        s.logout(&headers(&[("cookie", &cookie)]));
        let after = headers(&[("host", "jobs.example"), ("cookie", &cookie)]);
        assert_eq!(s.admit(&get, &after, false).unwrap_err(), Refusal::Login);
        assert!(session_cookie(&id, "").contains("HttpOnly; SameSite=Strict"));
    }
}
