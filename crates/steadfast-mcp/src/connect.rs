//! Opening an upstream MCP server — a child process over stdio, a streamable-HTTP URL, or a
//! server in the same process over a byte pipe — with retries on connect.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
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
    /// A server in the same process, spoken to over a byte pipe with the stdio transport's
    /// framing (one JSON-RPC message per line): an MCP server embedded in the application,
    /// or a scripted one in tests. Each (re)connection asks [`InProcess::connect`] for a new
    /// pipe, so a restart is a new pipe, as it is a new child for [`Upstream::Command`].
    InProcess(InProcess),
}

/// The two ends of an in-process upstream's pipe, as its client holds them: what the server
/// writes is read from `reader`; what is written to `writer` the server reads.
pub struct Pipe {
    /// The server's output.
    pub reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    /// The server's input; dropping it is the server's end of input (EOF), as closing a
    /// child's stdin is.
    pub writer: Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
}

impl std::fmt::Debug for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipe").finish_non_exhaustive()
    }
}

/// What opens a connection to an in-process server ([`Upstream::InProcess`]).
type Connect = dyn Fn() -> std::io::Result<Pipe> + Send + Sync;

/// An in-process server: a name for logs and a function that opens one connection to it.
///
/// The function is called on a Tokio runtime each time the upstream is (re)connected; it
/// usually makes a `tokio::io::duplex` pipe, spawns the server on one end and returns the
/// other. An error is a failed start (retried on the connect policy, like a command that
/// cannot be started; `NotFound` and `PermissionDenied` are not retried).
///
/// Two values are equal when they share the same function (clones of one value), so a
/// reloaded configuration that keeps the value keeps the upstream.
///
/// ```
/// use steadfast_mcp::{InProcess, Upstream};
/// let up = Upstream::InProcess(InProcess::new("embedded", || {
///     Err(std::io::Error::other("not yet"))
/// }));
/// assert_eq!(up.to_string(), "in-process embedded");
/// ```
#[derive(Clone)]
pub struct InProcess {
    name: Arc<str>,
    connect: Arc<Connect>,
}

impl InProcess {
    /// An in-process server called `name` (in logs), reached through the pipes `connect`
    /// opens.
    pub fn new(
        name: impl Into<String>,
        connect: impl Fn() -> std::io::Result<Pipe> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into().into(),
            connect: Arc::new(connect),
        }
    }

    /// The name it was given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Opens one connection to the server.
    pub fn connect(&self) -> std::io::Result<Pipe> {
        (self.connect)()
    }
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for InProcess {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.connect, &other.connect)
    }
}

impl Eq for InProcess {}

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
            Self::InProcess(p) => write!(f, "in-process {}", steadfast::sanitize(p.name())),
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
        Upstream::InProcess(p) => {
            let pipe = p.connect().map_err(|source| ConnectError::Spawn {
                command: format!("in-process {}", p.name()),
                source,
            })?;
            service
                .serve((pipe.reader, pipe.writer))
                .await
                .map_err(|e| {
                    ConnectError::Initialize(steadfast::sanitize(&e.to_string()).into_owned())
                })
        }
        #[cfg(not(feature = "http"))]
        Upstream::Http { .. } => Err(ConnectError::Config(
            "HTTP upstreams need the `http` feature of steadfast-mcp".to_owned(),
        )),
    }
}
