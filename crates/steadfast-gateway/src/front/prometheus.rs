//! The process's Prometheus recorder, shared by the fronts that serve a scrape (the HTTP
//! front's `/metrics`, the admin listener's), and the `# HELP` lines it carries.

use std::sync::OnceLock;

use metrics_exporter_prometheus::PrometheusHandle;

/// Bucket bounds of the call-latency histogram, in seconds: from a fast local tool to a call
/// that spent its whole default budget (170 s).
const LATENCY_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0,
];

/// The process's metrics recorder, installed by the first front that asks (the HTTP front, or
/// the admin listener), unless one is installed already (a library user's: then `None`, and
/// neither serves a scrape). One per process, so both fronts serve the same scrape.
/// Latencies are histograms (buckets), not summaries: `histogram_quantile` works on them and
/// replicas' series can be summed.
pub(crate) fn recorder() -> Option<&'static PrometheusHandle> {
    static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS)
                .ok()?
                .install_recorder()
                .ok()?;
            describe_metrics();
            Some(handle)
        })
        .as_ref()
}

/// The `# HELP` lines of the scrape (ops/README.md lists what the dashboard and alerts read).
fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    steadfast::describe_metrics();
    steadfast_jobs::describe_metrics();
    describe_histogram!(
        "steadfast_tool_call_duration_seconds",
        metrics::Unit::Seconds,
        "Tool call latency seen by the client, retries and waits included, by tool."
    );
    describe_gauge!(
        "steadfast_upstream_connected",
        "1 while the gateway holds a connection to the upstream, by upstream."
    );
    describe_counter!(
        "steadfast_upstream_restarts_total",
        "Reconnections to an upstream after it died, by upstream."
    );
    describe_gauge!(
        "steadfast_sessions",
        "HTTP front sessions open (set at each scrape)."
    );
    describe_gauge!(
        "steadfast_requests_in_flight",
        "Client requests being served."
    );
    describe_counter!(
        "steadfast_tasks_created_total",
        "Durable tasks created (task-augmented calls to durable tools)."
    );
    describe_gauge!(
        "steadfast_redis_up",
        "1 while the shared state's Redis answers ([state])."
    );
    describe_counter!(
        "steadfast_redis_fallbacks_total",
        "Times a replica fell back to local state because Redis did not answer."
    );
    describe_counter!(
        "steadfast_redis_reports_dropped_total",
        "Breaker outcomes dropped because the report buffer toward Redis was full."
    );
}
