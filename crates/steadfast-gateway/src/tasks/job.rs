//! The job behind a durable call: each job attempt is ONE upstream attempt, so retries wait in
//! the job store (`run_at`), never in memory, and a restart picks them up.
//!
//! What counts as a failure, whether it may be replayed and what the model is told are the live
//! call's: the attempt is `call::attempt`'s, classified by `CallFailure`, vetoed by
//! the same rule (replay only tools that may be replayed, or calls that provably never ran),
//! and the `LlmError` a task ends with is the one the engine itself gives for that failure.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use steadfast::{
    CancellationToken, Classify, ErrorClass, ErrorCode, LlmError, OwnedPermit, RetryBudget,
    RetryPolicy,
};
use steadfast_jobs::JobContext;
use steadfast_mcp::{CallFailure, ToolCall, ToolPolicy};

use super::Shared;
use super::store::{TaskRow, TaskStore, status};
use super::wire::{llm_result, outcome_unknown, unknown};
use crate::call::Answer;

/// The handler's name in the job store.
pub(crate) const HANDLER: &str = "steadfast.tools_call";

/// A job's payload: the task it runs (everything else is in the task row).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Payload {
    pub task: String,
}

/// A failed attempt, as the job store classifies it.
#[derive(Debug)]
pub(crate) struct AttemptError {
    class: ErrorClass,
    message: String,
    /// Not to be retried whatever the class says (the call may have taken effect).
    declined: bool,
}

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Classify for AttemptError {
    fn classify(&self) -> ErrorClass {
        self.class.clone()
    }
}

fn internal(why: impl std::fmt::Display) -> AttemptError {
    AttemptError {
        class: ErrorClass::retriable(ErrorCode::new("TASK_STORE")),
        message: format!("task store: {why}"),
        declined: false,
    }
}

/// The registered handler.
pub(crate) fn handler(shared: Arc<Shared>) -> steadfast_jobs::Registered {
    steadfast_jobs::handler(HANDLER, move |ctx: JobContext, p: Payload| {
        let shared = shared.clone();
        async move { run(&shared, ctx, p).await }
    })
    .should_retry(|e: &AttemptError, _, _| !e.declined)
    .into()
}

async fn run(s: &Shared, ctx: JobContext, p: Payload) -> Result<(), AttemptError> {
    let store = s.store.get().ok_or_else(|| internal("not open"))?;
    let Some(row) = store.get(&p.task, s.now()).await.map_err(internal)? else {
        return Ok(()); // expired and purged: nobody can ask for it any more
    };
    if row.status != status::WORKING {
        return Ok(()); // cancelled (or finished by an attempt whose settlement was lost)
    }
    let attempt = i64::from(ctx.attempt());
    if row.sent > row.answered && !row.replay {
        // An attempt was sent and its answer never recorded: the gateway died mid-call. As in
        // a live call that lost its connection, a tool that may not be replayed is not sent
        // again; the task ends with "outcome unknown" (written before that attempt was sent).
        let failure = row
            .last_failure
            .clone()
            .unwrap_or_else(|| llm_result(&outcome_unknown(&row.tool)));
        tracing::warn!(task = %row.task_id, tool = %row.tool, "a durable call was sent before a restart and never answered; not resent (the tool is not idempotent)");
        return end_failed(s, store, &row, &failure).await;
    }
    let Some(to) = s.resolver.resolve(&row.tool) else {
        let mut e = LlmError::new(steadfast::LlmErrorCode::InvalidRequest).with_tool(&row.tool);
        e.message = "no upstream serves this tool any more".to_owned();
        return end_failed(s, store, &row, &llm_result(&e)).await;
    };
    let listed = to.upstream.lists(&to.name);
    let entry = to.tools.entry(&to.key, listed);
    let policy = &entry.settings.policy;
    let params: Value = serde_json::from_str(&row.params).map_err(internal)?;
    withdraw(to.tools.budget(), attempt, policy)?;
    let permit = match &entry.breaker {
        Some(b) => match b.try_acquire_owned() {
            Ok(p) => Some(p),
            Err(rejected) => {
                // Not sent: waits for the breaker's probe time instead of failing the task.
                let mut class = ErrorClass::retriable(ErrorCode::CIRCUIT_OPEN)
                    .with_message("circuit breaker is open");
                class.retry_after = rejected.retry_in;
                let llm = LlmError::from_class(&rejected.class())
                    .with_tool(&row.tool)
                    .with_attempts(ctx.attempt());
                store
                    .record_failure(&row.task_id, row.answered, &llm_result(&llm), s.now())
                    .await
                    .map_err(internal)?;
                return Err(AttemptError {
                    class,
                    message: "circuit breaker is open".to_owned(),
                    declined: false,
                });
            }
        },
        None => None,
    };
    if let Some(limit) = to.tools.call_limit() {
        let keys = crate::call::limits::keys(row.owner.clone(), &to.key, &to.upstream.name);
        if let Err(e) = limit.acquire(&keys).await {
            return fail(s, store, &row, attempt, CallFailure::Limited(e)).await;
        }
    }
    // Recorded before the request goes out: a crash from here on leaves `sent > answered`.
    let if_lost = would_be_final(
        &row.tool,
        CallFailure::Lost(rmcp::ServiceError::TransportClosed),
        row.replay,
        attempt,
    )
    .await;
    // Registered before the mark: a cancel that sees the attempt as sent finds it here (or,
    // from another replica, through `watch`), so it cannot slip between the two.
    let cancel = s.running(&row.task_id);
    let marked = store
        .mark_sent(&row.task_id, attempt, &llm_result(&if_lost), s.now())
        .await
        .map_err(internal);
    if !matches!(marked, Ok(true)) {
        s.done_running(&row.task_id);
        return marked.map(|_| ()); // cancelled meanwhile, or the store failed
    }
    let outcome = tokio::select! {
        r = super::attempt::traced(&to, &params, policy, &row.task_id, ctx.attempt()) => Some(r),
        _ = cancel.cancelled() => None,
        _ = ctx.cancelled().cancelled() => None,
    };
    s.done_running(&row.task_id);
    let Some(outcome) = outcome else {
        // The attempt was dropped, which cancelled its upstream request.
        if ctx.cancelled().is_cancelled() {
            return Err(internal("the worker is stopping"));
        }
        return Ok(()); // the client cancelled the task
    };
    settle(s, store, &row, attempt, outcome, permit).await
}

/// Ends the task as failed without an attempt (`result` says why).
async fn end_failed(
    s: &Shared,
    store: &TaskStore,
    row: &TaskRow,
    result: &str,
) -> Result<(), AttemptError> {
    store
        .finish(&row.task_id, status::FAILED, result, row.answered, s.now())
        .await
        .map_err(internal)?;
    Ok(())
}

/// The upstream's retry budget: the first attempt deposits, a retry withdraws. As in
/// `steadfast-jobs`, a retry the budget cannot pay for waits the longest delay the policy
/// allows instead of adding to a burst.
fn withdraw(
    budget: Option<RetryBudget>,
    attempt: i64,
    policy: &ToolPolicy,
) -> Result<(), AttemptError> {
    let Some(budget) = budget else {
        return Ok(());
    };
    if attempt == 1 {
        budget.deposit();
    } else if !budget.try_withdraw() {
        return Err(AttemptError {
            class: ErrorClass::retriable(ErrorCode::new("RETRY_BUDGET"))
                .with_retry_after(policy.engine_policy().max_delay()),
            message: "the upstream's retry budget is spent; this retry waits".to_owned(),
            declined: false,
        });
    }
    Ok(())
}

/// Records an attempt's outcome: the task's result, or a failed attempt; the breaker told.
pub(super) async fn settle(
    s: &Shared,
    store: &TaskStore,
    row: &TaskRow,
    attempt: i64,
    outcome: Result<Answer, CallFailure>,
    permit: Option<OwnedPermit>,
) -> Result<(), AttemptError> {
    match outcome {
        Ok(answer) => {
            if let Some(p) = permit {
                p.success();
            }
            let (st, result) = if answer.is_error {
                // A business failure goes to the model as the tool wrote it, sanitized.
                (
                    status::FAILED,
                    crate::wire::sanitize::sanitize_error_result(&answer.raw),
                )
            } else {
                (status::COMPLETED, answer.raw)
            };
            let finished = store
                .finish(&row.task_id, st, &result, attempt, s.now())
                .await
                .map_err(internal)?;
            if !finished {
                // Cancelled while this attempt ran, and answered before the cancel reached it.
                after_cancel(s, store, row, attempt, &result).await?;
            }
            Ok(())
        }
        Err(f) => {
            if let Some(p) = permit {
                p.record(f.classify().counts_as_breaker_failure());
            }
            fail(s, store, row, attempt, f).await
        }
    }
}

/// Records a failed attempt (with the error the task ends with if it was the last) and hands
/// the job store its class.
async fn fail(
    s: &Shared,
    store: &TaskStore,
    row: &TaskRow,
    attempt: i64,
    f: CallFailure,
) -> Result<(), AttemptError> {
    let class = f.classify();
    let declined = !(row.replay || f.never_ran());
    let message = f.to_string();
    let llm = llm_result(&would_be_final(&row.tool, f, row.replay, attempt).await);
    let recorded = store
        .record_failure(&row.task_id, attempt, &llm, s.now())
        .await
        .map_err(internal)?;
    if !recorded {
        // Cancelled while it ran: nothing to retry; the cancelled task tells how it ended.
        return after_cancel(s, store, row, attempt, &llm).await;
    }
    Err(AttemptError {
        class,
        message,
        declined,
    })
}

/// Keeps the answer of an attempt that was in flight when its task was cancelled, so the
/// cancelled task says what the upstream did (see `wire::derive`).
async fn after_cancel(
    s: &Shared,
    store: &TaskStore,
    row: &TaskRow,
    attempt: i64,
    result: &str,
) -> Result<(), AttemptError> {
    let kept = store
        .answered_after_cancel(&row.task_id, attempt, result, s.now())
        .await
        .map_err(internal)?;
    if kept {
        tracing::info!(task = %row.task_id, tool = %row.tool, attempt, "a durable call was cancelled while its attempt ran, and the upstream answered before the cancel reached it; the answer is kept");
    }
    Ok(())
}

/// The `LlmError` a live call gives if `failure` is its last: the engine is run on it, so the
/// code, message and the "outcome unknown" wording are the live call's own.
pub(crate) async fn would_be_final(
    tool: &str,
    failure: CallFailure,
    replay: bool,
    attempt: i64,
) -> LlmError {
    // With a second attempt allowed, a failure that may not be replayed ends as the live
    // call's does ("declined": sent, outcome unknown); otherwise as its last attempt.
    let declined = !(replay || failure.never_ran());
    let retry = if declined {
        RetryPolicy::builder()
            .max_attempts(2)
            .build()
            .unwrap_or_else(|_| RetryPolicy::no_retry())
    } else {
        RetryPolicy::no_retry()
    };
    let policy = ToolPolicy::new(retry).unwrap_or_default();
    let mut once = Some(failure);
    let out =
        ToolCall::new(tool, &policy)
            .replays_ambiguous(replay)
            .run_judged(
                &CancellationToken::new(),
                |_| {
                    let f = once.take();
                    async move {
                        Err::<(), _>(f.unwrap_or_else(|| CallFailure::NotSent("not sent".into())))
                    }
                },
                Ok,
            )
            .await;
    let mut e = out
        .err()
        .unwrap_or_else(|| unknown(tool, "the call failed"));
    e.attempts_made = Some(u32::try_from(attempt).unwrap_or(u32::MAX));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lost_call_to_a_tool_that_may_not_be_replayed_ends_as_outcome_unknown() {
        let lost = || CallFailure::Lost(rmcp::ServiceError::TransportClosed);
        let e = would_be_final("charge", lost(), false, 1).await;
        assert!(
            e.message.starts_with("The outcome of this call is unknown"),
            "{e:?}"
        );
        assert_eq!(
            (e.code, e.retriable, e.attempts_made),
            (steadfast::LlmErrorCode::OutcomeUnknown, false, Some(1))
        );
        let e = would_be_final("lookup", lost(), true, 3).await;
        assert!(!e.message.contains("unknown"), "{e:?}");
        assert_eq!(
            (e.attempts_made, e.tool.as_deref()),
            (Some(3), Some("lookup"))
        );
        let not_sent =
            would_be_final("charge", CallFailure::NotSent("down".into()), false, 2).await;
        assert_eq!(not_sent.code, steadfast::LlmErrorCode::ServiceUnavailable);
    }
}
