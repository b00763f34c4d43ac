//! What each jobs page shows, read from the store at most once per refresh period however
//! many people watch it: this cache is what bounds the console's load on the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use steadfast_jobs::inspect::{
    Inspector, JobDetail, JobFilter, JobPage, Minute, QueueCounts, SchedulePage,
};
use steadfast_jobs::{JobId, JobState, JobsError, KeyStatus};
use tokio::sync::Mutex;

/// Most pages' data kept at once (distinct paths and queries); the oldest goes first.
const MAX_ENTRIES: usize = 256;

/// A page's data.
// Built once per refresh period and shared in an `Arc`: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Data {
    /// The front page.
    Overview {
        /// Every queue's counts.
        queues: Vec<QueueCounts>,
        /// The last hour, per minute.
        minutes: Vec<Minute>,
        /// The newest dead letters.
        dead: JobPage,
        /// Keys with limits or paused.
        keys: Vec<KeyStatus>,
        /// The first schedules.
        schedules: SchedulePage,
    },
    /// A page of a queue's (or every queue's) jobs in one state.
    Jobs {
        /// The queue, if one.
        queue: Option<QueueCounts>,
        /// The page.
        page: JobPage,
    },
    /// One job.
    Job(Option<JobDetail>),
    /// A page of schedules.
    Schedules(SchedulePage),
    /// Keys.
    Keys(Vec<KeyStatus>),
}

/// What to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// The front page.
    Overview,
    /// Jobs in a state, of one queue or all.
    Jobs {
        /// The queue.
        handler: Option<String>,
        /// The state.
        state: JobState,
        /// Keyset cursor.
        before: Option<JobId>,
    },
    /// One job.
    Job(JobId),
    /// Schedules after an id.
    Schedules(Option<i64>),
    /// Keys.
    Keys,
}

/// Page data by what was asked, with when it was read.
#[derive(Debug)]
pub struct Cache {
    inspector: Inspector,
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Arc<Data>)>>,
}

/// Rows of a jobs page, and dead letters on the front page.
pub const PAGE: u32 = 50;
const FRONT_DEAD: u32 = 10;
const FRONT_SCHEDULES: u32 = 20;

impl Cache {
    /// A cache over `inspector`, whose entries live `ttl`.
    pub fn new(inspector: Inspector, ttl: Duration) -> Self {
        Self {
            inspector,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The inspector.
    pub fn inspector(&self) -> &Inspector {
        &self.inspector
    }

    /// Forgets everything (after an action, so the next page shows its effect).
    pub async fn clear(&self) {
        self.entries.lock().await.clear();
    }

    /// The data of `want`, read now unless read within the TTL. Reads are one at a time: a
    /// second viewer of the same page waits for the first read and gets its answer.
    pub async fn get(&self, want: &Want) -> Result<Arc<Data>, JobsError> {
        let key = format!("{want:?}");
        let mut entries = self.entries.lock().await;
        if let Some((at, data)) = entries.get(&key)
            && at.elapsed() < self.ttl
        {
            return Ok(data.clone());
        }
        let data = Arc::new(self.read(want).await?);
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), data.clone()));
        Ok(data)
    }

    async fn read(&self, want: &Want) -> Result<Data, JobsError> {
        let i = &self.inspector;
        Ok(match want {
            Want::Overview => Data::Overview {
                queues: i.queues().await?,
                minutes: i.minutes(60).await?,
                dead: i
                    .page(&JobFilter::new(JobState::Dead).limit(FRONT_DEAD))
                    .await?,
                keys: i.keys().await?,
                schedules: i.schedules(None, FRONT_SCHEDULES).await?,
            },
            Want::Jobs {
                handler,
                state,
                before,
            } => {
                let mut filter = JobFilter::new(*state).before(*before).limit(PAGE);
                let mut queue = None;
                if let Some(h) = handler {
                    filter = filter.handler(h.clone());
                    // The counts of one queue: from the same grouped read as the front page.
                    queue = i.queues().await?.into_iter().find(|q| &q.handler == h);
                }
                Data::Jobs {
                    queue,
                    page: i.page(&filter).await?,
                }
            }
            Want::Job(id) => Data::Job(i.job(*id).await?),
            Want::Schedules(after) => Data::Schedules(i.schedules(*after, PAGE).await?),
            Want::Keys => Data::Keys(i.keys().await?),
        })
    }
}
