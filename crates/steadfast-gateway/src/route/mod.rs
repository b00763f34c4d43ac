//! Which upstream, which name, which policy: the router over one or several upstreams, the
//! per-tool state (policies, breakers, budgets, call limits) and the state shared across
//! replicas. Sits above `upstream/` and below the session.

pub(crate) mod router;
pub(crate) mod shared;
pub(crate) mod tools;
