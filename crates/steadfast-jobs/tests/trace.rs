//! Job attempt spans (messaging `process` spans) and the enqueuer's W3C trace context stored with
//! each job, on SQLite and PostgreSQL: the context survives the store, every attempt hands it to
//! the propagation inside its own span, and retries, dead letters and deferrals are events.
//!
//! The runtime is current-thread: the capturing subscriber is the thread's default, and the
//! worker's tasks must run where it is installed.

#[path = "../../steadfast/tests/capture/mod.rs"]
mod capture;
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capture::{Capture, EventRec, SpanRec};
use common::Db;
use steadfast::{ErrorClass, Jitter, RetryPolicy};
use steadfast_jobs::{
    JobContext, JobOptions, Jobs, ManualClock, ScheduleOptions, TraceContext, TracePropagation,
    When, handler, trace,
};

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const CURRENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// What `attach` saw: the stored context, the span it was given, and whether that span had
/// been entered yet.
#[derive(Debug, Clone, PartialEq)]
struct Attached {
    traceparent: String,
    tracestate: Option<String>,
    span: Option<u64>,
    entered: bool,
}

#[derive(Clone, Default)]
struct Recorder {
    attached: Arc<Mutex<Vec<Attached>>>,
    current: Option<&'static str>,
}

impl TracePropagation for Recorder {
    fn current(&self) -> Option<TraceContext> {
        self.current
            .map(|tp| TraceContext::parse(tp, None).unwrap())
    }

    fn attach(&self, span: &tracing::Span, stored: &TraceContext) {
        self.attached.lock().unwrap().push(Attached {
            traceparent: stored.traceparent.clone(),
            tracestate: stored.tracestate.clone(),
            span: span.id().map(|i| i.into_u64()),
            entered: tracing::Span::current().id() == span.id(),
        });
    }
}

/// A job store with handler `t` (503 on its first attempt, then fine; 400 when the payload says
/// so) and the propagation `rec`.
async fn jobs(db: &Db, clock: &ManualClock, rec: &Recorder) -> Jobs {
    Jobs::builder()
        .defaults(
            RetryPolicy::builder()
                .jitter(Jitter::None)
                .base_delay(Duration::from_secs(1)),
        )
        .handler(handler("t", |ctx: JobContext, status: u16| async move {
            // The handler sees the stored context too, to continue it downstream.
            let tp = ctx.trace_context().map(|t| t.traceparent.clone());
            match status {
                400 => Err(ErrorClass::from_status(400)),
                _ if ctx.attempt() == 1 => Err(ErrorClass::from_status(503)),
                _ => {
                    tracing::info!(seen = tp.as_deref().unwrap_or("none"), "handler ran");
                    Ok(())
                }
            }
        }))
        .clock(clock.clone())
        .trace_propagation(rec.clone())
        .connect_with(db.opts.clone())
        .await
        .unwrap()
}

fn attempt_spans(capture: &Capture) -> Vec<SpanRec> {
    capture
        .spans()
        .into_iter()
        .filter(|s| s.name == trace::SPAN_NAME)
        .collect()
}

fn named<'a>(events: &'a [EventRec], message: &str) -> Vec<&'a EventRec> {
    events.iter().filter(|e| e.message() == message).collect()
}

fn clock() -> ManualClock {
    ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap())
}

async fn each_attempt_is_a_process_span_linked_to_the_stored_context(db: Db) {
    let (capture, _guard) = Capture::install();
    let clock = clock();
    let rec = Recorder::default();
    let jobs = jobs(&db, &clock, &rec).await;
    let id = jobs
        .queue(
            "t",
            &503u16,
            JobOptions::new().traceparent(TP, Some("vendor=abc")),
        )
        .await
        .unwrap();
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!(job.traceparent.as_deref(), Some(TP));
    assert_eq!(job.tracestate.as_deref(), Some("vendor=abc"));

    let w = jobs.worker(Default::default());
    assert_eq!(w.run_once().await.unwrap(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(w.run_once().await.unwrap(), 1);

    let spans = attempt_spans(&capture);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let f = |s: &SpanRec, k: &str| s.fields.get(k).cloned();
    for (span, n) in spans.iter().zip(1..) {
        assert_eq!(f(span, "otel.name").as_deref(), Some("process t"));
        assert_eq!(f(span, "otel.kind").as_deref(), Some("consumer"));
        assert_eq!(f(span, "messaging.system").as_deref(), Some("steadfast"));
        assert_eq!(
            f(span, "messaging.operation.name").as_deref(),
            Some("process")
        );
        assert_eq!(
            f(span, "messaging.operation.type").as_deref(),
            Some("process")
        );
        assert_eq!(f(span, "messaging.destination.name").as_deref(), Some("t"));
        assert_eq!(f(span, "messaging.message.id"), Some(id.to_string()));
        assert_eq!(f(span, "steadfast.job.attempt"), Some(n.to_string()));
    }
    let (first, second) = (&spans[0], &spans[1]);
    assert_eq!(f(first, "steadfast.job.outcome").as_deref(), Some("retry"));
    assert_eq!(f(first, "error.type").as_deref(), Some("SERVER_ERROR"));
    assert_eq!(f(second, "steadfast.job.outcome").as_deref(), Some("done"));
    assert_eq!(f(second, "error.type"), None, "a success has no error.type");

    // One retry event on the first attempt: its delay is the stored backoff.
    let events = capture.events_in(first.id);
    let retries = named(&events, trace::event::RETRY);
    assert_eq!(retries.len(), 1, "{events:#?}");
    let g = |k: &str| retries[0].fields.get(k).map(String::as_str);
    assert_eq!(g("steadfast.attempt"), Some("1"));
    assert_eq!(g("steadfast.delay_ms"), Some("1000"));
    assert_eq!(g("steadfast.reason"), Some("SERVER_ERROR"));
    assert_eq!(g("steadfast.retry_after_honoured"), Some("false"));
    // The handler ran inside the second attempt's span and saw the stored context.
    let ran = capture.events_in(second.id);
    let ran = named(&ran, "handler ran");
    assert_eq!(ran[0].fields.get("seen").map(String::as_str), Some(TP));

    // `attach` ran once per attempt, with that attempt's span before it was entered (when a
    // tracer may still give it a parent), and with what was stored.
    let attached = rec.attached.lock().unwrap().clone();
    let want: Vec<_> = spans
        .iter()
        .map(|s| Attached {
            traceparent: TP.to_owned(),
            tracestate: Some("vendor=abc".to_owned()),
            span: Some(s.id),
            entered: false,
        })
        .collect();
    assert_eq!(attached, want);
}

async fn jobs_queued_without_a_context_store_the_propagations_current_one(db: Db) {
    let (capture, _guard) = Capture::install();
    let clock = clock();
    let rec = Recorder {
        current: Some(CURRENT),
        ..Recorder::default()
    };
    let jobs = jobs(&db, &clock, &rec).await;
    let one = jobs.queue("t", &503u16, JobOptions::new()).await.unwrap();
    let many = jobs.queue_many("t", [503u16, 503]).await.unwrap();
    let later = jobs
        .schedule(
            When::delay(Duration::from_secs(5)),
            "t",
            &503u16,
            ScheduleOptions::new(),
        )
        .await
        .unwrap();
    let explicit = jobs
        .queue("t", &503u16, JobOptions::new().traceparent(TP, None))
        .await
        .unwrap();
    let cron = jobs
        .schedule(
            When::every(Duration::from_secs(60)),
            "t",
            &503u16,
            ScheduleOptions::new(),
        )
        .await
        .unwrap();
    for id in [one, many[0], many[1], later] {
        let job = jobs.get(id).await.unwrap().unwrap();
        assert_eq!(job.traceparent.as_deref(), Some(CURRENT), "job {id}");
        assert_eq!(job.tracestate, None);
    }
    let explicit = jobs.get(explicit).await.unwrap().unwrap();
    assert_eq!(
        explicit.traceparent.as_deref(),
        Some(TP),
        "an explicit context wins"
    );
    // A recurring schedule's runs start traces of their own.
    assert_eq!(jobs.get(cron).await.unwrap().unwrap().traceparent, None);
    // The four due jobs run; each attempt is handed what its job stored.
    assert_eq!(jobs.worker(Default::default()).run_once().await.unwrap(), 4);
    let mut seen: Vec<_> = rec
        .attached
        .lock()
        .unwrap()
        .iter()
        .map(|a| a.traceparent.clone())
        .collect();
    seen.sort();
    assert_eq!(seen, [CURRENT, CURRENT, CURRENT, TP]);
    assert_eq!(attempt_spans(&capture).len(), 4);
}

async fn a_bad_traceparent_is_refused_naming_the_field(db: Db) {
    let clock = clock();
    let jobs = jobs(&db, &clock, &Recorder::default()).await;
    let bad = TP.to_uppercase();
    let e = jobs
        .queue("t", &503u16, JobOptions::new().traceparent(bad, None))
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("invalid traceparent:"), "{e}");
    let e = jobs
        .queue(
            "t",
            &503u16,
            JobOptions::new().traceparent(TP, Some("a=\u{7}")),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("invalid tracestate:"), "{e}");
    assert!(
        jobs.list(None, 10).await.unwrap().is_empty(),
        "nothing was queued"
    );
}

async fn a_dead_letter_and_a_deferral_are_events_of_their_attempt(db: Db) {
    let (capture, _guard) = Capture::install();
    let clock = clock();
    let rec = Recorder::default();
    let jobs = jobs(&db, &clock, &rec).await;
    jobs.queue("t", &400u16, JobOptions::new()).await.unwrap();
    jobs.worker(Default::default()).run_once().await.unwrap();
    let spans = attempt_spans(&capture);
    assert_eq!(spans.len(), 1);
    assert_eq!(
        spans[0]
            .fields
            .get("steadfast.job.outcome")
            .map(String::as_str),
        Some("dead")
    );
    assert_eq!(
        spans[0].fields.get("error.type").map(String::as_str),
        Some("CLIENT_ERROR")
    );
    let events = capture.events_in(spans[0].id);
    let dead = named(&events, trace::event::DEAD);
    assert_eq!(dead.len(), 1, "{events:#?}");
    let g = |k: &str| dead[0].fields.get(k).map(String::as_str);
    assert_eq!(g("steadfast.give_up_reason"), Some("non_retriable"));
    assert_eq!(g("steadfast.reason"), Some("CLIENT_ERROR"));
    assert!(
        rec.attached.lock().unwrap().is_empty(),
        "no context stored, none attached"
    );

    // A job whose dependency's breaker is open goes back without spending its attempt.
    let jobs = Jobs::builder()
        .handler(
            handler("d", |_c: JobContext, _p: u8| async {
                Ok::<(), ErrorClass>(())
            })
            .dependency("db"),
        )
        .clock(clock.clone())
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    jobs.breaker("db").isolate();
    jobs.queue("d", &1u8, JobOptions::new()).await.unwrap();
    jobs.worker(Default::default()).run_once().await.unwrap();
    let span = attempt_spans(&capture).pop().unwrap();
    assert_eq!(
        span.fields.get("steadfast.job.outcome").map(String::as_str),
        Some("breaker_open")
    );
    let events = capture.events_in(span.id);
    let deferred = named(&events, trace::event::DEFERRED);
    assert_eq!(deferred.len(), 1, "{events:#?}");
    assert_eq!(
        deferred[0]
            .fields
            .get("steadfast.reason")
            .map(String::as_str),
        Some("breaker_open")
    );
}

macro_rules! both_current_thread {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "current_thread")]
            async fn sqlite() {
                super::$name(super::common::Db::sqlite()).await;
            }

            #[tokio::test(flavor = "current_thread")]
            #[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
            async fn postgres() {
                let db = super::common::Db::postgres(stringify!($name));
                super::$name(db).await;
            }
        }
    )*};
}

both_current_thread!(
    each_attempt_is_a_process_span_linked_to_the_stored_context,
    jobs_queued_without_a_context_store_the_propagations_current_one,
    a_bad_traceparent_is_refused_naming_the_field,
    a_dead_letter_and_a_deferral_are_events_of_their_attempt,
);

/// `jobs show` names the trace that queued the job: what to look up in the tracing backend.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "current_thread")]
async fn jobs_show_names_the_trace_that_queued_the_job() {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        jobs: steadfast_jobs::cli::JobsArgs,
    }

    let db = Db::sqlite();
    let jobs = jobs(&db, &clock(), &Recorder::default()).await;
    let traced = jobs
        .queue("t", &503u16, JobOptions::new().traceparent(TP, None))
        .await
        .unwrap();
    let plain = jobs.queue("t", &503u16, JobOptions::new()).await.unwrap();
    let show = |id: i64| {
        let url = db.url.clone();
        async move {
            let id = id.to_string();
            let cli = Cli::parse_from(["jobs", "--db", url.as_str(), "show", id.as_str()]);
            let mut out = Vec::new();
            steadfast_jobs::cli::run(cli.jobs, &mut out).await.unwrap();
            String::from_utf8(out).unwrap()
        }
    };
    let text = show(traced).await;
    assert!(
        text.contains(
            "trace:        4bf92f3577b34da6a3ce929d0e0e4736 (queued by span 00f067aa0ba902b7)"
        ),
        "{text}"
    );
    assert!(!show(plain).await.contains("trace:"));
}
