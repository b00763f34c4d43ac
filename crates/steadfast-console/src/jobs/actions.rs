//! The jobs console's POST actions. Each checks the form's CSRF token (the guard checked the
//! session and the `Origin` already), acts through the [`Inspector`](steadfast_jobs::inspect::Inspector),
//! forgets the cached page data so the next page shows the effect, and sends the browser back.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Form, Router};

use crate::jobs::JobsPages;
use crate::layout;
use crate::security::Visitor;

/// The fields any action form may carry.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ActionForm {
    csrf: Option<String>,
    back: Option<String>,
    id: Option<i64>,
    handler: Option<String>,
    key: Option<String>,
    op: Option<String>,
}

pub(crate) fn router(pages: Arc<JobsPages>) -> Router {
    Router::new()
        .route("/actions/{action}", post(act))
        .with_state(pages)
}

/// What went wrong with an action, for its page.
struct Failed(StatusCode, String);

async fn act(
    State(p): State<Arc<JobsPages>>,
    axum::extract::Path(action): axum::extract::Path<String>,
    Extension(visitor): Extension<Visitor>,
    Form(form): Form<ActionForm>,
) -> Response {
    let core = &p.core;
    if let Err(why) = core.security.check_csrf(&visitor, form.csrf.as_deref()) {
        return core.refuse(why, &Method::POST);
    }
    let result = run(&p, &action, &form).await;
    p.cache.clear().await;
    match result {
        Ok(()) => core.back(form.back.as_deref()).into_response(),
        Err(Failed(status, text)) => (
            status,
            layout::message(&core.opts.base, "The action failed", &text),
        )
            .into_response(),
    }
}

fn need<T: Clone>(v: &Option<T>, what: &str) -> Result<T, Failed> {
    v.clone()
        .ok_or_else(|| Failed(StatusCode::BAD_REQUEST, format!("the form lacks {what}")))
}

fn nothing(done: bool, what: String) -> Result<(), Failed> {
    if done {
        Ok(())
    } else {
        Err(Failed(StatusCode::CONFLICT, what))
    }
}

async fn run(p: &JobsPages, action: &str, f: &ActionForm) -> Result<(), Failed> {
    let i = p.cache.inspector();
    let store =
        |e: steadfast_jobs::JobsError| Failed(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    match action {
        "retry" => {
            let id = need(&f.id, "id")?;
            let done = i.retry(id).await.map_err(store)?;
            nothing(
                done,
                format!("job {id} is not dead or cancelled (any more)"),
            )
        }
        "discard" => {
            let id = need(&f.id, "id")?;
            let done = i.discard(id).await.map_err(store)?;
            nothing(done, format!("job {id} is not a dead letter (any more)"))
        }
        "cancel" => {
            let id = need(&f.id, "id")?;
            let done = i.handle().cancel(id).await.map_err(store)?;
            nothing(
                done,
                format!("job {id} has started or finished: it cannot be cancelled"),
            )
        }
        "retry-dead" => {
            i.retry_dead(f.handler.as_deref()).await.map_err(store)?;
            Ok(())
        }
        "schedule" => {
            let id = need(&f.id, "id")?;
            let op = need(&f.op, "op")?;
            let done = match op.as_str() {
                "pause" => i.pause_schedule(id).await,
                "resume" => i.resume_schedule(id).await,
                "cancel" => i.cancel_schedule(id).await,
                _ => {
                    return Err(Failed(
                        StatusCode::BAD_REQUEST,
                        "op must be pause, resume or cancel".into(),
                    ));
                }
            }
            .map_err(store)?;
            nothing(
                done,
                format!("schedule {id} could not be {op}d from its state"),
            )
        }
        "key" => {
            let key = need(&f.key, "key")?;
            match need(&f.op, "op")?.as_str() {
                "pause" => i.pause_key(&key).await.map_err(store),
                "resume" => i.resume_key(&key).await.map(|_| ()).map_err(store),
                _ => Err(Failed(
                    StatusCode::BAD_REQUEST,
                    "op must be pause or resume".into(),
                )),
            }
        }
        "queue" => {
            let handler = need(&f.handler, "handler")?;
            let jobs = i.handle();
            match need(&f.op, "op")?.as_str() {
                "pause" => jobs.pause_queue(&handler).await.map_err(store),
                "resume" => jobs.resume_queue(&handler).await.map(|_| ()).map_err(store),
                _ => Err(Failed(
                    StatusCode::BAD_REQUEST,
                    "op must be pause or resume".into(),
                )),
            }
        }
        other => Err(Failed(
            StatusCode::NOT_FOUND,
            format!("no action {other:?}"),
        )),
    }
}
