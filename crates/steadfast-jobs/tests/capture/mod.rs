//! A small `tracing` layer that keeps every span (with its fields, recorded late ones included)
//! and every event (with the span it belongs to), for asserting what a call traced.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

pub type Fields = BTreeMap<String, String>;

#[derive(Debug, Clone)]
pub struct SpanRec {
    pub id: u64,
    pub name: &'static str,
    pub fields: Fields,
}

#[derive(Debug, Clone)]
pub struct EventRec {
    pub span: Option<u64>,
    pub fields: Fields,
}

impl EventRec {
    pub fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Log {
    spans: Vec<SpanRec>,
    events: Vec<EventRec>,
}

/// The captured spans and events; clone it into the layer and keep one to read.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Log>>);

impl Capture {
    /// Installs the capture for the current thread until the guard drops.
    pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        (capture, tracing::subscriber::set_default(subscriber))
    }

    pub fn spans(&self) -> Vec<SpanRec> {
        self.0.lock().unwrap().spans.clone()
    }

    /// The events recorded inside span `id`, in order.
    pub fn events_in(&self, id: u64) -> Vec<EventRec> {
        let log = self.0.lock().unwrap();
        log.events
            .iter()
            .filter(|e| e.span == Some(id))
            .cloned()
            .collect()
    }
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Visitor(&mut fields));
        let name = attrs.metadata().name();
        let id = id.into_u64();
        self.0
            .lock()
            .unwrap()
            .spans
            .push(SpanRec { id, name, fields });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut log = self.0.lock().unwrap();
        // Ids are reused after a span closes: the latest span with this id is the live one.
        if let Some(span) = log.spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            values.record(&mut Visitor(&mut span.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let span = ctx.event_span(event).map(|s| s.id().into_u64());
        self.0
            .lock()
            .unwrap()
            .events
            .push(EventRec { span, fields });
    }
}
