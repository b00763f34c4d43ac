//! Which upstream, which name, which policy: the router over one or several upstreams (its
//! [`topology::Topology`], decided once when it is built), the per-tool state (policies,
//! breakers, budgets, call limits) and the state shared across replicas. Sits above
//! `upstream/` and below the session.

pub(crate) mod router;
pub(crate) mod shared;
pub(crate) mod snapshot;
pub(crate) mod tools;
pub(crate) mod topology;
pub(crate) mod upstream_route;
