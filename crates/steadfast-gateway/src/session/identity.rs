//! Who a session's client is (set by the HTTP front from a verified OAuth token), and what it
//! may list and call.
//!
//! The front checks the token; the session only applies the verdicts: lists (`tools/list`,
//! `prompts/list`, `resources/list`, `resources/templates/list`) are filtered, a forbidden
//! `tools/call`, `prompts/get`, `resources/read` or `resources/subscribe` is refused with an
//! error naming it, and call limits count per token subject rather than per session. A session
//! without an identity (stdio, static tokens) sees everything, as before.

use std::sync::Arc;

use serde_json::Value;

use crate::session::Session;
use crate::wire::jsonrpc;

/// JSON-RPC error code of a request the token's access policy forbids (Steadfast's range).
pub(crate) const FORBIDDEN: i64 = -32010;

/// What a policy is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// A tool, by the name clients see.
    Tool,
    /// A prompt, by name.
    Prompt,
    /// A resource (or resource template), by URI.
    Resource,
}

impl Item {
    fn noun(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
        }
    }
}

/// The verdicts of an access policy for one token (implemented by the front over its policy).
pub(crate) trait Access: Send + Sync {
    /// Whether the token may see and use `name`.
    fn allows(&self, item: Item, name: &str) -> bool;
    /// Scopes that would grant the tool `name` (for an `insufficient_scope` answer).
    fn scopes_for(&self, item: Item, name: &str) -> Vec<String>;
}

/// The client of a session, from its token.
pub(crate) struct Identity {
    /// The token's subject (`sub`, else its `client_id`).
    pub sub: String,
    /// The token's scopes.
    pub scopes: Vec<String>,
    /// Every claim of the token (for extensions; the policy's verdicts are in `access`).
    #[allow(dead_code, reason = "kept for extensions and claim-based routing")]
    pub claims: Value,
    /// The access policy's verdicts for it; `None` lets it see and call everything.
    pub access: Option<Arc<dyn Access>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("sub", &self.sub)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The requests the policy gates, and where their name is in the params.
fn gated(method: &str) -> Option<(Item, &'static str)> {
    match method {
        "tools/call" => Some((Item::Tool, "name")),
        "prompts/get" => Some((Item::Prompt, "name")),
        "resources/read" | "resources/subscribe" => Some((Item::Resource, "uri")),
        _ => None,
    }
}

/// The lists the policy filters: the array's key and the field naming each entry.
fn listed(method: &str) -> Option<(Item, &'static str, &'static str)> {
    match method {
        "tools/list" => Some((Item::Tool, "tools", "name")),
        "prompts/list" => Some((Item::Prompt, "prompts", "name")),
        "resources/list" => Some((Item::Resource, "resources", "uri")),
        "resources/templates/list" => Some((Item::Resource, "resourceTemplates", "uriTemplate")),
        _ => None,
    }
}

impl Session {
    /// Sets (or renews, with a fresher token) the session's client. A token of another
    /// subject than the one that opened the session is refused (`Err`): a session id is not
    /// a credential another client may borrow.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // only the HTTP front identifies
    pub(crate) fn identify(&self, identity: Arc<Identity>) -> Result<(), ()> {
        let mut slot = self.identity.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|old| old.sub != identity.sub) {
            return Err(());
        }
        *slot = Some(identity);
        Ok(())
    }

    /// The session's client, if the front identified one.
    pub(crate) fn identity(&self) -> Option<Arc<Identity>> {
        self.identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What call limits count by: the token's subject (so a user's limit holds across their
    /// sessions and, with `[state]`, across replicas), else the session.
    pub(crate) fn limit_key(&self) -> String {
        match self.identity().filter(|i| !i.sub.is_empty()) {
            Some(i) => format!("sub:{}", i.sub),
            None => self.id.clone(),
        }
    }
}

impl crate::call::Caller for Session {
    fn limit_key(&self) -> String {
        Session::limit_key(self)
    }
}

/// A request's method and params as its front decoded them: what an access policy reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    /// The method.
    pub method: &'a str,
    /// The params as written, if the request has params.
    pub raw: Option<&'a str>,
    /// The params decoded, when the front decoded them already (read first).
    pub decoded: Option<&'a Value>,
}

impl Asked<'_> {
    /// A string member of the params (decoded only when the front did not).
    pub(crate) fn param(&self, key: &str) -> Option<String> {
        if let Some(v) = self.decoded {
            return v.get(key)?.as_str().map(str::to_owned);
        }
        let v: Value = serde_json::from_str(self.raw?).ok()?;
        v.get(key)?.as_str().map(str::to_owned)
    }
}

impl Session {
    /// Whether the token's policy lets this client read the resource `uri` (always, without
    /// an identity or a policy).
    pub(crate) fn may_read(&self, uri: &str) -> bool {
        self.identity()
            .and_then(|i| i.access.clone())
            .is_none_or(|a| a.allows(Item::Resource, uri))
    }

    /// The refusal (the line answering request `id`) when the policy forbids it.
    pub(crate) fn refusal(&self, id: &str, asked: &Asked<'_>) -> Option<Vec<u8>> {
        let (item, key) = gated(asked.method)?;
        let access = self.identity().and_then(|i| i.access.clone())?;
        // A request without a name is the upstream's (or the session's) to refuse.
        let name = asked.param(key).filter(|n| !access.allows(item, n))?;
        tracing::debug!(session = %self.id, item = item.noun(), name, "refused by the access policy");
        Some(forbidden(id, item, &name, &access.scopes_for(item, &name)))
    }

    /// A list answer with what the policy hides removed (other answers as they are).
    pub(crate) fn filter_list(&self, method: &str, line: Vec<u8>) -> Vec<u8> {
        let Some((item, array, key)) = listed(method) else {
            return line;
        };
        let Some(access) = self.identity().and_then(|i| i.access.clone()) else {
            return line;
        };
        let Ok(mut v) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        let Some(entries) = v
            .pointer_mut(&format!("/result/{array}"))
            .and_then(Value::as_array_mut)
        else {
            return line;
        };
        entries.retain(|e| {
            e.get(key)
                .and_then(Value::as_str)
                .is_some_and(|n| access.allows(item, n))
        });
        let mut out = v.to_string().into_bytes();
        out.push(b'\n');
        out
    }
}

/// The error answering a forbidden request: it names the item, and carries
/// `insufficient_scope` with the scopes that would grant it, if any would.
pub(crate) fn forbidden(id: &str, item: Item, name: &str, scopes: &[String]) -> Vec<u8> {
    let noun = item.noun();
    let mut error = serde_json::json!({
        "code": FORBIDDEN,
        "message": format!("this token may not use the {noun} {name:?}"),
    });
    if !scopes.is_empty() {
        error["message"] = format!(
            "this token may not use the {noun} {name:?}: it needs the scope {}",
            scopes.join(" or ")
        )
        .into();
        error["data"] = serde_json::json!({
            "error": "insufficient_scope",
            "scope": scopes.join(" "),
        });
    }
    jsonrpc::raw_error_response(id, &error.to_string())
}
