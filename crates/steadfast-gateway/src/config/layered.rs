//! Settings given on the command line, layered under a config file: the file wins, table by
//! table, so flags give defaults a file can refine.

use std::path::Path;

use super::{Config, ConfigError};

/// The common settings a command line gives without a config file (`steadfast proxy
/// --retries 3 …`); each is a key of the TOML config, named in its doc.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Retries after the first attempt: `[defaults] retry.max_attempts` = N + 1.
    pub retries: Option<u32>,
    /// `[defaults] retry.attempt_timeout`, as written (`"30s"`).
    pub attempt_timeout: Option<String>,
    /// `[defaults] retry.max_elapsed`, as written (`"2m"`).
    pub max_elapsed: Option<String>,
    /// `[proxy] health_tool`.
    pub health_tool: Option<String>,
}

impl Overrides {
    /// The settings as TOML, or `None` when none is given.
    fn to_toml(&self) -> Option<String> {
        let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut retry = Vec::new();
        if let Some(n) = self.retries {
            retry.push(format!("max_attempts = {}", u64::from(n) + 1));
        }
        if let Some(d) = &self.attempt_timeout {
            retry.push(format!("attempt_timeout = {}", q(d)));
        }
        if let Some(d) = &self.max_elapsed {
            retry.push(format!("max_elapsed = {}", q(d)));
        }
        let mut out = String::new();
        if let Some(h) = &self.health_tool {
            out.push_str(&format!("[proxy]\nhealth_tool = {}\n", q(h)));
        }
        if !retry.is_empty() {
            out.push_str(&format!("[defaults]\nretry = {{ {} }}\n", retry.join(", ")));
        }
        (!out.is_empty()).then_some(out)
    }
}

impl Config {
    /// The config file at `path` (if any; see [`Config::load_all`]) layered over `flags`: the
    /// file is checked alone first, so its errors keep its line numbers, then its TOML is
    /// merged over the flags' table by table (the file wins). An `mcpServers` JSON file
    /// contributes its upstreams only.
    pub fn layered(
        path: Option<&Path>,
        server: Option<&str>,
        flags: &Overrides,
    ) -> Result<Self, Vec<ConfigError>> {
        let file_config = match path {
            Some(p) => Some(Self::load_all(p, server)?),
            None => None,
        };
        let Some(flags) = flags.to_toml() else {
            return Ok(file_config.unwrap_or_default());
        };
        let command_line = |message: String| {
            vec![ConfigError {
                file: "<command line>".to_owned(),
                line: None,
                key: String::new(),
                message,
            }]
        };
        let under: toml::Table = toml::from_str(&flags).map_err(|e| command_line(e.to_string()))?;
        let over: toml::Table = match path {
            Some(p) if p.extension().is_none_or(|e| e != "json") => {
                let located = |message: String| {
                    vec![ConfigError {
                        file: p.display().to_string(),
                        line: None,
                        key: String::new(),
                        message,
                    }]
                };
                let text =
                    std::fs::read_to_string(p).map_err(|e| located(format!("cannot read: {e}")))?;
                toml::from_str(&text).map_err(|e| located(e.to_string()))?
            }
            _ => toml::Table::new(),
        };
        let text = toml::to_string(&merge(under, over)).map_err(|e| command_line(e.to_string()))?;
        let mut config = Self::parse_toml_all(&text, "<command line>")?;
        if let Some(f) = file_config {
            if config.upstream.is_none() && config.upstreams.is_empty() {
                config.upstream = f.upstream;
                config.upstreams = f.upstreams;
            }
            config.warnings.extend(f.warnings);
        }
        Ok(config)
    }
}

/// `over` merged into `under`, tables merged key by key, anything else replaced.
fn merge(under: toml::Table, over: toml::Table) -> toml::Table {
    let mut out = under;
    for (k, v) in over {
        let merged = match (out.remove(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => toml::Value::Table(merge(a, b)),
            (_, v) => v,
        };
        out.insert(k, merged);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(c: &Config) -> String {
        format!("{:?}", c.tool("t").policy)
    }

    fn parsed(text: &str) -> Config {
        Config::parse_toml(text, "expected").unwrap()
    }

    #[test]
    fn a_file_refines_what_the_flags_give_key_by_key() {
        let dir = std::env::temp_dir().join(format!("steadfast-layered-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, "[defaults]\nretry = { max_attempts = 7 }\n").unwrap();
        let flags = Overrides {
            retries: Some(2),
            max_elapsed: Some("90s".into()),
            health_tool: Some("health".into()),
            ..Overrides::default()
        };
        // The file's max_attempts wins; the flags' max_elapsed and [proxy] stay.
        let c = Config::layered(Some(&file), None, &flags).unwrap();
        assert_eq!(c.health_tool.as_deref(), Some("health"));
        let merged = "[defaults]\nretry = { max_attempts = 7, max_elapsed = \"90s\" }\n";
        assert_eq!(policy(&c), policy(&parsed(merged)));
        let flags_only = Config::layered(None, None, &flags).unwrap();
        let given = "[defaults]\nretry = { max_attempts = 3, max_elapsed = \"90s\" }\n";
        assert_eq!(policy(&flags_only), policy(&parsed(given)));
        assert_ne!(policy(&c), policy(&flags_only));
        let none = Config::layered(None, None, &Overrides::default()).unwrap();
        assert_eq!(policy(&none), policy(&Config::default()));
        assert_eq!(none.health_tool, None);
        // A broken file: its own located error, not the merged text's.
        std::fs::write(&file, "[defaults]\nretry = { max_attempts = 0 }\n").unwrap();
        let errors = Config::layered(Some(&file), None, &flags).unwrap_err();
        assert!(
            errors[0]
                .to_string()
                .starts_with(&format!("{}:2:", file.display())),
            "{}",
            errors[0]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
