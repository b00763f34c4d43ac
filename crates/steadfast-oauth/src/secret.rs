//! Secrets (client secrets, access tokens) that cannot be printed by accident.

use std::fmt;

/// A string whose `Debug` and `Display` print `[redacted]`; read it with [`Secret::expose`].
///
/// ```
/// let s = steadfast_oauth::Secret::new("hunter2");
/// assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
/// assert_eq!(s.expose(), "hunter2");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// `Authorization: Basic` for client_secret_basic: RFC 6749 §2.3.1 form-encodes id and secret
/// before base64 (servers such as oidc-provider insist on it).
pub(crate) fn basic_auth(client_id: &str, secret: &Secret) -> String {
    use base64::Engine as _;
    let pair = format!(
        "{}:{}",
        form_encode(client_id),
        form_encode(secret.expose())
    );
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn basic_auth_form_encodes_before_base64() {
        let header = super::basic_auth("my client", &super::Secret::new("a:b/c"));
        // base64("my+client:a%3Ab%2Fc")
        assert_eq!(header, "Basic bXkrY2xpZW50OmElM0FiJTJGYw==");
    }
}
