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

    /// The value of the environment variable `name`; the error names the variable, never a value.
    pub fn from_env(name: &str) -> Result<Self, String> {
        match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => Ok(Self(v.trim().to_owned())),
            Ok(_) => Err(format!("environment variable {name} is empty")),
            Err(_) => Err(format!(
                "environment variable {name} is not set (or not UTF-8)"
            )),
        }
    }

    /// The contents of the file at `path`, trimmed (a trailing newline is not part of a secret).
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("secret file {}: {e}", path.display()))?;
        match text.trim() {
            "" => Err(format!("secret file {} is empty", path.display())),
            v => Ok(Self(v.to_owned())),
        }
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
    fn secrets_from_files_are_trimmed_and_errors_name_the_source() {
        let dir =
            std::env::temp_dir().join(format!("steadfast-oauth-secret-{}", std::process::id()));
        std::fs::write(&dir, "s3cret\n").unwrap();
        assert_eq!(super::Secret::from_file(&dir).unwrap().expose(), "s3cret");
        std::fs::write(&dir, "\n").unwrap();
        assert!(
            super::Secret::from_file(&dir)
                .unwrap_err()
                .contains("is empty")
        );
        std::fs::remove_file(&dir).unwrap();
        assert!(
            super::Secret::from_file(&dir)
                .unwrap_err()
                .starts_with("secret file ")
        );
        let err = super::Secret::from_env("STEADFAST_OAUTH_TEST_UNSET_VARIABLE").unwrap_err();
        assert!(
            err.contains("STEADFAST_OAUTH_TEST_UNSET_VARIABLE is not set"),
            "{err}"
        );
    }

    #[test]
    fn basic_auth_form_encodes_before_base64() {
        let header = super::basic_auth("my client", &super::Secret::new("a:b/c"));
        // base64("my+client:a%3Ab%2Fc")
        assert_eq!(header, "Basic bXkrY2xpZW50OmElM0FiJTJGYw==");
    }
}
