//! The relay to one upstream: its handshake answered to the client, a request forwarded and
//! its reply turned into the client's answer, a `tools/list` page completed. With several
//! upstreams ([`Topology::Namespaced`]) the same entry points, `initialize` and `forward`,
//! go to the gathering in `gather.rs` instead.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::{Session, progress_token};
use crate::route::topology::Topology;
use crate::route::upstream_route::Route;
use crate::upstream::{Params, Related};
use crate::wire::jsonrpc::{self, code};

/// The answer to `initialize`, and what it means for the session.
pub(crate) enum InitAnswer {
    /// A result: the session is initialized.
    Started(Vec<u8>),
    /// An error; the session may try again.
    Refused(Vec<u8>),
    /// An error because no upstream can start: a stdio proxy then exits non-zero, as an MCP
    /// server that cannot start does.
    Unstartable(Vec<u8>),
}

impl InitAnswer {
    /// Whether the client was answered with a result.
    pub(crate) fn started(&self) -> bool {
        matches!(self, Self::Started(_))
    }

    /// Whether no upstream can start.
    pub(crate) fn unstartable(&self) -> bool {
        matches!(self, Self::Unstartable(_))
    }

    /// The line answering the client.
    pub(crate) fn into_line(self) -> Vec<u8> {
        match self {
            Self::Started(l) | Self::Refused(l) | Self::Unstartable(l) => l,
        }
    }
}

impl Session {
    /// `initialize`: the upstream's handshake, or every upstream's gathered.
    pub(super) async fn initialize(self: &Arc<Self>, id: &str, params: &str) -> InitAnswer {
        match self.router.topology() {
            Topology::Single(route) => self.initialize_one(route, id, params).await,
            Topology::Namespaced { .. } => self.initialize_all(id, params).await,
        }
    }

    /// Forwards a request (to the upstream, or to the one its name or URI routes it to) and
    /// returns the line that answers it.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Vec<u8> {
        match self.router.topology() {
            Topology::Single(route) => match self.ask(route, id, method, params).await {
                Ok(r) if method == "tools/list" => {
                    jsonrpc::result_response(id, &self.tools_list(route, &r, params))
                }
                Ok(r) => jsonrpc::result_response(id, &r),
                Err(line) => line,
            },
            Topology::Namespaced { .. } => self.dispatch(id, method, params).await,
        }
    }

    /// `initialize` with one upstream: its handshake result, adjusted and extended.
    async fn initialize_one(
        self: &Arc<Self>,
        route: &Arc<Route>,
        id: &str,
        params: &str,
    ) -> InitAnswer {
        let upstream = &route.upstream;
        self.router.start(params, self.client.clone());
        let bound = upstream.settings().init_timeout;
        match upstream.wait_connected(bound).await {
            Ok(()) => {
                let config = self.router.config();
                if let Some(h) = config.health_tool.as_deref().filter(|h| upstream.lists(h)) {
                    return InitAnswer::Refused(jsonrpc::error_response(
                        id,
                        code::INVALID_REQUEST,
                        &format!(
                            "[proxy] health_tool = \"{h}\" is also the name of one of the \
                             upstream's tools; rename the health tool"
                        ),
                    ));
                }
                // Breakers exist from the start for every listed tool, so a shared one hears
                // of an outage another replica saw before this one calls the tool.
                self.router.expose_listed(route);
                if !self.warned_unlisted.swap(true, Ordering::Relaxed) {
                    for name in config.exact_tool_names() {
                        if !upstream.lists(name) {
                            tracing::warn!(
                                tool = name,
                                "the config sets a policy for a tool the upstream does not list"
                            );
                        }
                    }
                }
                let result = self.router.init_result(std::slice::from_ref(route));
                let result = self.extend_initialize(params, result);
                InitAnswer::Started(jsonrpc::result_response(id, &result))
            }
            Err(why) if upstream.is_down() => InitAnswer::Unstartable(jsonrpc::error_response(
                id,
                code::UPSTREAM_UNAVAILABLE,
                &format!(
                    "the upstream server ({}) could not be started: {}",
                    upstream.describe(),
                    steadfast::sanitize(&why)
                ),
            )),
            Err(why) => InitAnswer::Refused(jsonrpc::error_response(
                id,
                code::UPSTREAM_UNAVAILABLE,
                &format!(
                    "the upstream server ({}) did not complete its handshake within {:?}: {}",
                    upstream.describe(),
                    bound,
                    steadfast::sanitize(&why)
                ),
            )),
        }
    }

    /// Forwards a request to one upstream and returns the line that answers it.
    pub(crate) async fn forward_to(
        self: &Arc<Self>,
        route: &Route,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Vec<u8> {
        match self.ask(route, id, method, params).await {
            Ok(result) => jsonrpc::result_response(id, &result),
            Err(line) => line,
        }
    }

    /// Sends a request to one upstream: its result, or the error line that answers the client.
    async fn ask(
        self: &Arc<Self>,
        route: &Route,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Result<String, Vec<u8>> {
        let upstream = &route.upstream;
        let link = match upstream.link().await {
            Ok(l) => l,
            Err(why) => {
                return Err(jsonrpc::error_response(
                    id,
                    code::UPSTREAM_UNAVAILABLE,
                    &steadfast::sanitize(&why),
                ));
            }
        };
        // The request's own stream (an HTTP POST answered with server-sent events), if any:
        // its progress and the server's related requests go there.
        let stream = self.request_stream(id);
        let progress = params
            .filter(|p| p.contains("\"progressToken\""))
            .and_then(progress_token)
            .map(|token| crate::upstream::ProgressRoute {
                client: self.client.clone(),
                token: token.into(),
                high: Arc::default(),
                activity: Arc::default(),
                stream: stream.clone(),
            });
        let related = Related {
            origin: Some(&*self.client),
            progress,
            stream,
        };
        let bound = upstream.settings().request_timeout;
        let params = params.map(Params::Raw);
        let max_size = upstream.settings().max_message_size;
        upstream
            .request(&link, method, params, related, bound)
            .await
            .map_err(|e| e.answer(id, method, max_size))
    }

    /// A `tools/list` page: hints learned, the health tool appended to the last page.
    fn tools_list(&self, route: &Route, result: &str, params: Option<&str>) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(result) else {
            return result.to_owned();
        };
        let first_page = params
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .is_none_or(|p| p.get("cursor").is_none());
        route.upstream.learn_tools(&v, first_page);
        let changed = self.extend_tools_list(&mut v);
        let last_page = v.get("nextCursor").is_none_or(Value::is_null);
        match (
            last_page,
            crate::session::health::tool(&self.router.config()),
        ) {
            (true, Some(health)) => {
                if let Some(tools) = v.get_mut("tools").and_then(Value::as_array_mut) {
                    tools.push(health);
                }
                v.to_string()
            }
            _ if changed => v.to_string(),
            _ => result.to_owned(),
        }
    }
}
