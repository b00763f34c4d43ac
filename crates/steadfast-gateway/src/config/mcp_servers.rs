//! The `mcpServers` reader: a Claude Desktop / Cursor / VS Code / Claude Code JSON file, with
//! the keys those clients write, served with default policies.

use super::*;

/// The file as read: its servers by name.
#[derive(Deserialize)]
struct Doc {
    #[serde(rename = "mcpServers", alias = "servers")]
    mcp_servers: BTreeMap<String, serde_json::Value>,
}

/// One server entry, with the keys the clients write.
#[derive(Deserialize, Default)]
struct Entry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    transport: Option<String>,
    #[serde(default)]
    disabled: bool,
}

/// An `mcpServers` file being read: its text (for lines), its name (for errors), its servers.
struct McpFile<'a> {
    text: &'a str,
    file: &'a str,
    doc: Doc,
}

impl McpFile<'_> {
    fn err(&self, line: Option<usize>, key: String, message: String) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line,
            key,
            message,
        }
    }

    /// The line that names `name` (its entry), if any.
    fn line_of(&self, name: &str) -> Option<usize> {
        self.text
            .lines()
            .position(|l| l.contains(&format!("\"{name}\"")))
            .map(|i| i + 1)
    }

    /// The names of the entries not `"disabled": true`.
    fn enabled(&self) -> Vec<&String> {
        self.doc
            .mcp_servers
            .iter()
            .filter(|(_, v)| v.get("disabled").and_then(serde_json::Value::as_bool) != Some(true))
            .map(|(k, _)| k)
            .collect()
    }

    /// The entry `name` as an upstream: its transport, and the checks of `[upstream]`.
    fn upstream(&self, name: &str) -> Result<Upstream, ConfigError> {
        let key = format!("mcpServers.{name}");
        let entry: Entry = serde_json::from_value(self.doc.mcp_servers[name].clone())
            .map_err(|e| self.err(self.line_of(name), key.clone(), e.to_string()))?;
        let _ = entry.disabled;
        let kind = entry
            .kind
            .as_deref()
            .or(entry.transport.as_deref())
            .map(|k| k.to_ascii_lowercase().replace(['_', '-'], ""));
        let raw = match kind.as_deref() {
            Some("http" | "streamablehttp" | "streamable") => RawUpstream {
                url: entry.url,
                headers: entry.headers,
                ..RawUpstream::default()
            },
            Some("sse") => {
                return Err(self.err(
                    self.line_of(name),
                    format!("{key}.type"),
                    "the SSE transport is deprecated and not supported; use the server's streamable HTTP endpoint (type \"http\")".into(),
                ));
            }
            Some("stdio") | None => RawUpstream {
                command: entry.command,
                args: entry.args,
                env: entry.env,
                cwd: entry.cwd,
                url: entry.url,
                headers: entry.headers,
                oauth: None,
            },
            Some(other) => {
                return Err(self.err(
                    self.line_of(name),
                    format!("{key}.type"),
                    format!("unknown transport `{other}`: expected \"stdio\" or \"http\""),
                ));
            }
        };
        if wraps_itself(&raw, self.file, name) {
            return Err(self.err(
                self.line_of(name),
                key,
                "runs `steadfast proxy` on this same file and entry: it would start itself \
                 without end. Point the entry at the real server, and wrap it from another \
                 file or entry"
                    .into(),
            ));
        }
        upstream_from(raw, self.file, self.text).map_err(|mut e| {
            e.key = e.key.replacen("upstream", &key, 1);
            e.line = e.line.or_else(|| self.line_of(name));
            e
        })
    }

    /// `--server s`: that entry, which must exist and be enabled.
    fn chosen(&self, s: &str) -> Result<String, ConfigError> {
        let Some(v) = self.doc.mcp_servers.get(s) else {
            return Err(self.err(
                None,
                format!("mcpServers.{s}"),
                format!(
                    "no such server (the file has: {})",
                    self.doc
                        .mcp_servers
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if v.get("disabled").and_then(serde_json::Value::as_bool) == Some(true) {
            return Err(self.err(
                self.line_of(s),
                format!("mcpServers.{s}"),
                "is disabled (\"disabled\": true)".into(),
            ));
        }
        Ok(s.to_owned())
    }

    /// Every enabled entry, behind one endpoint (their names checked as `[upstreams.NAME]`).
    fn all(&self, enabled: &[&String]) -> Result<Config, ConfigError> {
        let mut upstreams = Vec::new();
        for name in enabled {
            upstreams.push(NamedUpstream {
                name: (*name).clone(),
                spec: self.upstream(name)?,
                budget: None,
            });
        }
        let names: Vec<&String> = upstreams.iter().map(|u| &u.name).collect();
        let defaults = Config::default();
        if let Some((_, long, message)) =
            crate::wire::naming::ambiguous(&names, &defaults.separator)
        {
            return Err(self.err(self.line_of(&long), format!("mcpServers.{long}"), message));
        }
        if let Some(bad) = names
            .iter()
            .find(|n| crate::wire::naming::check_upstream_name(n).is_err())
        {
            let message = crate::wire::naming::check_upstream_name(bad)
                .err()
                .unwrap_or_default();
            return Err(self.err(self.line_of(bad), format!("mcpServers.{bad}"), message));
        }
        Ok(Config {
            upstreams,
            ..defaults
        })
    }
}

impl Config {
    /// Parses a Claude Desktop / Cursor / VS Code / Claude Code config
    /// (`{"mcpServers": {"name": {…}}}`); the proxy then runs with default policies.
    ///
    /// Keys those clients write (`type`, `disabled`, `transport`, `url`, `headers`, …) are
    /// understood, and unknown keys are ignored, so a real client's file works as it is:
    /// `type = "http"` (or `"streamable-http"`) with `url` is an HTTP upstream, and
    /// `disabled: true` entries are skipped. An entry that runs `steadfast proxy` on this same
    /// file and entry is refused: it would wrap itself without end.
    pub(crate) fn parse_mcp_servers(
        text: &str,
        file: &str,
        server: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let doc: Doc = serde_json::from_str(text).map_err(|e| ConfigError {
            file: file.to_owned(),
            line: Some(e.line()),
            key: String::new(),
            message: e.to_string(),
        })?;
        let f = McpFile { text, file, doc };
        let enabled = f.enabled();
        let name = match server {
            Some(s) => f.chosen(s)?,
            None if enabled.len() == 1 => enabled[0].clone(),
            None if enabled.is_empty() => {
                return Err(f.err(None, "mcpServers".into(), "has no enabled server".into()));
            }
            None => return f.all(&enabled),
        };
        Ok(Config {
            upstream: Some(f.upstream(&name)?),
            ..Config::default()
        })
    }
}

/// Whether an entry runs this proxy on this same config file and entry.
pub(super) fn wraps_itself(u: &RawUpstream, file: &str, name: &str) -> bool {
    let Some(command) = &u.command else {
        return false;
    };
    let program = Path::new(command)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    if !program.starts_with("steadfast") || !u.args.iter().any(|a| a == "proxy") {
        return false;
    }
    let same = |a: &str| {
        let a = Path::new(a).canonicalize().ok();
        a.is_some() && a == Path::new(file).canonicalize().ok()
    };
    let arg_after = |flags: &[&str]| {
        u.args
            .iter()
            .position(|a| flags.contains(&a.as_str()))
            .and_then(|i| u.args.get(i + 1))
            .cloned()
            .or_else(|| {
                u.args.iter().find_map(|a| {
                    flags
                        .iter()
                        .find_map(|f| a.strip_prefix(&format!("{f}=")).map(str::to_owned))
                })
            })
    };
    let config_is_this = arg_after(&["--config", "-c"]).is_some_and(|c| same(&c));
    let server = arg_after(&["--server"]);
    config_is_this && server.is_none_or(|s| s == name)
}
