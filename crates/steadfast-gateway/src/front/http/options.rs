//! The rules an [`HttpOptions`] must keep before anything listens, in the library so that every
//! embedder gets them, not only the `steadfast` binary.

use super::HttpOptions;
use crate::config::Config;

impl HttpOptions {
    /// Checks the options against `config`: a listener beyond loopback needs a way to tell
    /// clients apart — static bearer tokens or an `[auth]` table — since anyone who can reach
    /// the port could otherwise call every tool; a token may not be empty; at least one session
    /// must fit. The error names the option and the constraint.
    ///
    /// ```
    /// use steadfast_gateway::{Config, HttpOptions};
    /// let config = Config::default();
    /// let open = HttpOptions { listen: "0.0.0.0:8080".parse().unwrap(), ..Default::default() };
    /// assert!(open.validate(&config).unwrap_err().contains("not a loopback address"));
    /// let guarded = HttpOptions { tokens: vec!["s3cret".into()], ..open };
    /// assert!(guarded.validate(&config).is_ok());
    /// ```
    pub fn validate(&self, config: &Config) -> Result<(), String> {
        if self.tokens.iter().any(|t| t.trim().is_empty()) {
            return Err("tokens: a bearer token may not be empty".to_owned());
        }
        if self.max_sessions == 0 {
            return Err("max_sessions: must be at least 1".to_owned());
        }
        if self.tokens.is_empty() && config.auth.is_none() && !self.listen.ip().is_loopback() {
            return Err(format!(
                "listen {}: not a loopback address: give bearer tokens (--token-env or \
                 --token-file) or an [auth] table",
                self.listen
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(listen: &str) -> HttpOptions {
        HttpOptions {
            listen: listen.parse().unwrap(),
            ..Default::default()
        }
    }

    #[test]
    fn beyond_loopback_needs_tokens_or_auth() {
        let config = Config::default();
        assert!(on("127.0.0.1:0").validate(&config).is_ok());
        assert!(on("[::1]:0").validate(&config).is_ok());
        let err = on("0.0.0.0:8080").validate(&config).unwrap_err();
        assert!(
            err.starts_with("listen 0.0.0.0:8080: not a loopback"),
            "{err}"
        );
        let with_token = HttpOptions {
            tokens: vec!["t".into()],
            ..on("0.0.0.0:8080")
        };
        assert!(with_token.validate(&config).is_ok());
        let blank = HttpOptions {
            tokens: vec![" ".into()],
            ..on("127.0.0.1:0")
        };
        assert!(blank.validate(&config).unwrap_err().starts_with("tokens:"));
        let none = HttpOptions {
            max_sessions: 0,
            ..on("127.0.0.1:0")
        };
        assert!(
            none.validate(&config)
                .unwrap_err()
                .starts_with("max_sessions:")
        );
    }
}
