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
        .with_filter(Exported { targets })
        .boxed();
    Ok((layer, provider))
}

/// What the exporter sees: Steadfast's spans (`targets`), and of its events only the named
/// ones the tables in docs/observability.md list (`steadfast.retry`, `steadfast.outcome`, …).
/// Ordinary log lines at `INFO` ("retrying", "durable call queued") are for the log, not span
/// events: exported, they arrived named after their message or, without one, after their
/// source line (`event crates/steadfast-mcp/src/call.rs:212`).
#[cfg(feature = "otel")]
struct Exported {
    targets: tracing_subscriber::filter::Targets,
}

#[cfg(feature = "otel")]
impl<S> tracing_subscriber::layer::Filter<S> for Exported {
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        tracing_subscriber::layer::Filter::<S>::enabled(&self.targets, meta, cx)
    }

    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing_subscriber::layer::Filter::<S>::callsite_enabled(&self.targets, meta)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        tracing_subscriber::layer::Filter::<S>::max_level_hint(&self.targets)
    }

    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        let mut name = EventName(false);
        event.record(&mut name);
        name.0
    }
}

/// Whether an event's message is one of the names Steadfast emits (`steadfast.` and no
/// space). The named events' messages are constant strings, so this formats nothing
/// else and allocates nothing.
#[cfg(feature = "otel")]
struct EventName(bool);

#[cfg(feature = "otel")]
impl tracing::field::Visit for EventName {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0 = is_named(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            use std::fmt::Write;
            // Long enough for every name in the tables; a longer message is not one.
            let mut buf = Bounded::<64>::default();
            self.0 = write!(buf, "{value:?}").is_ok() && is_named(buf.as_str());
        }
    }
}

#[cfg(feature = "otel")]
fn is_named(message: &str) -> bool {
    message.starts_with("steadfast.") && !message.contains(char::is_whitespace)
}

/// A fixed buffer that refuses what does not fit.
#[cfg(feature = "otel")]
struct Bounded<const N: usize> {
    buf: [u8; N],
    len: usize,
}

#[cfg(feature = "otel")]
impl<const N: usize> Default for Bounded<N> {
    fn default() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }
}

#[cfg(feature = "otel")]
impl<const N: usize> Bounded<N> {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

#[cfg(feature = "otel")]
impl<const N: usize> std::fmt::Write for Bounded<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > N {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    #[test]
    fn only_the_tables_names_are_exported_as_events() {
        assert!(super::is_named("steadfast.retry"));
        assert!(super::is_named("steadfast.breaker.opened"));
        for log in [
            "retrying",
            "durable call queued",
            "steadfast.retry happened",
            "",
        ] {
            assert!(!super::is_named(log), "{log:?}");
        }
    }
}
