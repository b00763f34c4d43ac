//! Logging, and with the `otel` feature the OTLP trace export (`[telemetry]`).
//!
//! One `tracing` registry: the log layer (stderr, filtered by `-v` / `RUST_LOG`) and, when
//! export is on, a `tracing-opentelemetry` layer with its own filter (the `steadfast*` targets
//! at `INFO`: the gateway's SERVER/CLIENT spans, the core's `execute_tool` spans and their
//! events). With export off no such layer exists, so `steadfast::trace::listening()` stays false
//! at the default log level and the call path builds no span.

use tracing_subscriber::EnvFilter;
#[cfg(feature = "otel")]
use tracing_subscriber::layer::SubscriberExt;
#[cfg(feature = "otel")]
use tracing_subscriber::util::SubscriberInitExt;

/// Flushes and stops the exporter when dropped (at the end of `main`'s command).
#[must_use = "dropping the guard stops the export"]
pub struct Guard {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("steadfast: telemetry: the last spans could not be exported: {e}");
        }
    }
}

fn log_filter(verbose: u8) -> EnvFilter {
    // Our crates at the asked level; the MCP library's internals only from -vvv.
    let default = match verbose {
        0 => "warn",
        1 => "warn,steadfast=info,steadfast_gateway=info,steadfast_mcp=info",
        2 => "warn,steadfast=debug,steadfast_gateway=debug,steadfast_mcp=debug",
        _ => "trace",
    };
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// Installs the logger, and the OTLP exporter when `telemetry` is `Some` (export on).
pub fn init(verbose: u8, telemetry: Option<&steadfast_gateway::Telemetry>) -> Guard {
    #[cfg(feature = "otel")]
    if let Some(t) = telemetry {
        match otel_layer(t) {
            Ok((otel, provider)) => {
                use tracing_subscriber::Layer;
                // Per-layer filters: the log keeps its level, the exporter sees `INFO`.
                let log = tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .with_filter(log_filter(verbose));
                let _ = tracing_subscriber::registry()
                    .with(vec![log.boxed(), otel])
                    .try_init();
                return Guard {
                    provider: Some(provider),
                };
            }
            Err(e) => eprintln!("steadfast: telemetry: export is off: {e}"),
        }
    }
    #[cfg(not(feature = "otel"))]
    if telemetry.is_some() {
        eprintln!(
            "steadfast: telemetry: an OTLP endpoint is set, but this build has no exporter (build with --features otel)"
        );
    }
    // Export off: the plain logger with a global filter, exactly as without telemetry. (A
    // registry of per-layer filters made every disabled `debug!` callsite a dynamic check:
    // +3% instructions per proxied call, measured.)
    let _ = tracing_subscriber::fmt()
        .with_env_filter(log_filter(verbose))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    Guard {
        #[cfg(feature = "otel")]
        provider: None,
    }
}

#[cfg(feature = "otel")]
type BoxedLayer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// The exporting layer: OTLP over HTTP with protobuf bodies, batched on the SDK's own thread
/// (its blocking HTTP client never runs on the proxy's runtime).
#[cfg(feature = "otel")]
fn otel_layer(
    t: &steadfast_gateway::Telemetry,
) -> anyhow::Result<(BoxedLayer, opentelemetry_sdk::trace::SdkTracerProvider)> {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::trace::Sampler;
    use tracing_subscriber::Layer;
    steadfast_gateway::install_crypto_provider(); // the exporter's reqwest client needs one
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&t.traces_endpoint)
        .build()?;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            t.sample_ratio,
        ))))
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(t.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("steadfast");
    // The spans and events Steadfast makes for tracing (all at INFO under its crates' targets);
    // not its logs at other levels, nor other crates' spans.
    let targets = tracing_subscriber::filter::Targets::new()
        .with_target("steadfast", tracing::Level::INFO)
        .with_target("steadfast_gateway", tracing::Level::INFO)
        .with_target("steadfast_mcp", tracing::Level::INFO);
    // Only the attributes the tables in docs/observability.md list: no per-span source
    // location, thread, target or busy/idle times (each an attribute to convert and encode on
    // every span; together a quarter of the export's instructions, measured in BENCHMARKS.md).
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(targets)
        .boxed();
    Ok((layer, provider))
}
