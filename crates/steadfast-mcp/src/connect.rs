//! Opening an upstream MCP server — a child process over stdio, or a streamable-HTTP URL —
//! with retries on connect.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::service::{RoleClient, RunningService, Service, ServiceExt};
use rmcp::transport::TokioChildProcess;
use steadfast::{Classify, ErrorClass, ErrorCode, Retry, RetryError, RetryPolicy};

/// Where the upstream server is.
///
/// ```
/// let up = steadfast_mcp::Upstream::command("python3", ["server.py"]);
/// assert_eq!(up.to_string(), "python3 server.py");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Upstream {
    /// A child process speaking MCP on its stdin/stdout; its stderr is passed through.
    Command {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Working directory, if not the proxy's.
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

impl Upstream {
    /// A child process without extra environment.
    ///
    /// See [`Upstream`] for an example.
    pub fn command<I, A>(command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<String>,
    {
        Self::Command {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Arguments can carry tokens (`--api-key …`): logs see them sanitized.
            Self::Command { command, args, .. } => {
                let mut line = command.clone();
                for a in args {
                    line.push(' ');
                    line.push_str(a);
                }
                f.write_str(&steadfast::sanitize(&line))
            }
            // Only scheme, host and path: the URL may carry credentials.
            Self::Http { url, .. } => f.write_str(&steadfast::sanitize(url)),
        }
    }
}

/// Why connecting to the upstream failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The child process could not be started.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The MCP handshake failed.
    #[error("MCP initialize failed: {0}")]
    Initialize(String),
    /// The configuration cannot work (a bad header, HTTP support not compiled in).
    #[error("{0}")]
    Config(String),
}

impl Classify for ConnectError {
    fn classify(&self) -> ErrorClass {
        match self {
            // A missing program or a permission problem will not fix itself.
            Self::Spawn { source, .. } => Classify::classify(source),
            Self::Initialize(msg) => {
                ErrorClass::retriable(ErrorCode::NETWORK_ERROR).with_message(msg.clone())
            }
            Self::Config(msg) => {
                ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR).with_message(msg.clone())
            }
        }
    }
}

/// The connect policy when none is given: 3 attempts, 500 ms base, 5 s cap, full jitter.
///
/// ```
/// let p = steadfast_mcp::default_connect_policy();
/// assert_eq!(p.max_attempts(), 3);
/// ```
pub fn default_connect_policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .base_delay(Duration::from_millis(500))
        .max_delay(Duration::from_secs(5))
        .build()
        .unwrap_or_default()
}

/// Connects to `upstream` and completes the MCP handshake, serving the client side with the
/// service `make()` returns (a fresh one per attempt). Retries under `policy`.
pub async fn connect<S, F>(
    upstream: &Upstream,
    policy: &RetryPolicy,
    make: F,
) -> Result<RunningService<RoleClient, S>, RetryError<ConnectError>>
where
    S: Service<RoleClient>,
    F: Fn() -> S,
{
    let retry = Retry::new(policy.clone()).name("connect");
    retry.run(|_| connect_once(upstream, make())).await
}

async fn connect_once<S: Service<RoleClient>>(
    upstream: &Upstream,
    service: S,
) -> Result<RunningService<RoleClient, S>, ConnectError> {
    match upstream {
        Upstream::Command {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (transport, _) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .map_err(|source| ConnectError::Spawn {
                    command: command.clone(),
                    source,
                })?;
            service.serve(transport).await.map_err(|e| {
                ConnectError::Initialize(steadfast::sanitize(&e.to_string()).into_owned())
            })
        }
        #[cfg(feature = "http")]
        Upstream::Http { url, headers } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            for (k, v) in headers {
                let name = http::HeaderName::try_from(k.as_str())
                    .map_err(|e| ConnectError::Config(format!("header `{k}`: {e}")))?;
                let value = http::HeaderValue::try_from(v.as_str())
                    .map_err(|_| ConnectError::Config(format!("header `{k}`: invalid value")))?;
                config.custom_headers.insert(name, value);
            }
            #[cfg(feature = "https")]
            {
                // reqwest is built without a default crypto provider; ring is ours. Installing
                // fails only if one is already installed, which is as good.
                let _ = rustls::crypto::ring::default_provider().install_default();
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            service.serve(transport).await.map_err(|e| {
                ConnectError::Initialize(steadfast::sanitize(&e.to_string()).into_owned())
            })
        }
        #[cfg(not(feature = "http"))]
        Upstream::Http { .. } => Err(ConnectError::Config(
            "HTTP upstreams need the `http` feature of steadfast-mcp".to_owned(),
        )),
    }
}
