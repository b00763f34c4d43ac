//! The jobs console: queues, jobs, dead letters, schedules and keys of one store, as a
//! [`Pages`] source on the shared shell, with its POST actions.

mod actions;
mod data;
mod pages;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use steadfast_jobs::JobState;
use steadfast_jobs::inspect::Inspector;

use crate::layout::Page;
use crate::options::ConsoleOptions;
use crate::security::Visitor;
use crate::shell::{self, Core, PageError, PageFuture, Pages};
use data::{Cache, Data, Want};
use pages::Ctx;

/// The jobs pages over one store.
pub(crate) struct JobsPages {
    core: Arc<Core>,
    cache: Cache,
}

/// The router of a jobs console over `inspector`'s store: mount it (`Router::nest` at
/// [`ConsoleOptions::base_path`]) or serve it with [`serve`](crate::serve).
pub fn router(inspector: Inspector, opts: ConsoleOptions) -> Router {
    let refresh = opts.refresh;
    let core = Core::new(opts);
    let pages = Arc::new(JobsPages {
        core: core.clone(),
        cache: Cache::new(inspector, refresh),
    });
    let actions = actions::router(pages.clone());
    shell::router(core, pages, actions)
}

fn parse_state(s: Option<&String>, default: JobState) -> Result<JobState, PageError> {
    Ok(match s.map(String::as_str) {
        None => default,
        Some("available") => JobState::Available,
        Some("running") => JobState::Running,
        Some("done") => JobState::Done,
        Some("dead") => JobState::Dead,
        Some("cancelled") => JobState::Cancelled,
        Some(other) => {
            return Err(PageError::Bad(format!(
                "state must be available, running, done, dead or cancelled (got {other:?})"
            )));
        }
    })
}

fn parse_id(s: Option<&String>, what: &str) -> Result<Option<i64>, PageError> {
    s.map(|v| {
        v.parse()
            .map_err(|_| PageError::Bad(format!("{what} must be a whole number (got {v:?})")))
    })
    .transpose()
}

/// What page `path` is, and what it reads.
fn route(path: &str, q: &HashMap<String, String>) -> Result<(String, Want), PageError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| PageError::Bad("the path is not UTF-8".into()))
    };
    Ok(match segs.as_slice() {
        [""] => ("Jobs".into(), Want::Overview),
        ["queues", name] => {
            let handler = decode(name)?;
            let state = parse_state(q.get("state"), JobState::Available)?;
            let before = parse_id(q.get("before"), "before")?;
            (
                format!(
                    "Queue {} · {}",
                    crate::layout::shown(&handler),
                    state.as_str()
                ),
                Want::Jobs {
                    handler: Some(handler),
                    state,
                    before,
                },
            )
        }
        ["dead"] => (
            "Dead letters".into(),
            Want::Jobs {
                handler: None,
                state: parse_state(q.get("state"), JobState::Dead)?,
                before: parse_id(q.get("before"), "before")?,
            },
        ),
        ["jobs", id] => {
            let id = parse_id(Some(&(*id).to_owned()), "the job id")?.unwrap_or(0);
            (format!("Job {id}"), Want::Job(id))
        }
        ["schedules"] => (
            "Schedules".into(),
            Want::Schedules(parse_id(q.get("after"), "after")?),
        ),
        ["keys"] => ("Keys".into(), Want::Keys),
        _ => return Err(PageError::NotFound(format!("no page at {path}"))),
    })
}

impl JobsPages {
    async fn page(
        &self,
        path: &str,
        q: &HashMap<String, String>,
        visitor: &Visitor,
    ) -> Result<Page, PageError> {
        let (title, want) = route(path, q)?;
        let data = self
            .cache
            .get(&want)
            .await
            .map_err(|e| PageError::Store(e.to_string()))?;
        let mut back = self.core.link(path);
        let query: Vec<String> = q
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "state" | "before" | "after"))
            .map(|(k, v)| format!("{k}={}", pages::seg(v)))
            .collect();
        if !query.is_empty() {
            back = format!("{back}?{}", query.join("&"));
        }
        let c = Ctx {
            base: &self.core.opts.base,
            csrf: &visitor.csrf,
            back,
            now: chrono::DateTime::from_timestamp_millis(self.cache.inspector().now_ms())
                .unwrap_or_default(),
            arguments: self.core.opts.show_arguments,
        };
        let sections = match (&*data, &want) {
            (
                Data::Overview {
                    queues,
                    minutes,
                    dead,
                    keys,
                    schedules,
                },
                _,
            ) => pages::overview(&c, queues, minutes, dead, keys, schedules),
            (Data::Jobs { queue, page }, Want::Jobs { handler, state, .. }) => {
                pages::jobs_page(&c, handler.as_deref(), queue.as_ref(), *state, page)
            }
            (Data::Job(Some(d)), _) => pages::job_page(&c, d),
            (Data::Job(None), Want::Job(id)) => {
                return Err(PageError::NotFound(format!("no job {id}")));
            }
            (Data::Schedules(p), _) => vec![crate::layout::Section {
                id: "schedules",
                html: pages::schedule_table(&c, p),
            }],
            (Data::Keys(k), _) => pages::keys_page(&c, k),
            _ => return Err(PageError::NotFound(format!("no page at {path}"))),
        };
        // The first page of a list refreshes live; an older page stays as it was read.
        let live = !q.contains_key("before") && !q.contains_key("after");
        Ok(Page {
            title,
            live,
            sections,
        })
    }
}

impl Pages for JobsPages {
    fn nav(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            ("Overview", "/"),
            ("Dead letters", "/dead"),
            ("Schedules", "/schedules"),
            ("Keys", "/keys"),
        ]
    }

    fn render<'a>(
        &'a self,
        path: &'a str,
        query: &'a HashMap<String, String>,
        visitor: &'a Visitor,
    ) -> PageFuture<'a> {
        Box::pin(self.page(path, query, visitor))
    }
}
