//! One tool call under a [`ToolPolicy`]: the retry engine, the breaker, the budget, metrics,
//! and the final translation into what the model receives.

use rmcp::model::{CallToolResult, ContentBlock};
use steadfast::{
    CancellationToken, CircuitBreaker, Failure, GiveUpReason, LlmError, Retry, RetryBudget,
    RetryError, ToolMetrics,
};

use tracing::Instrument;

use crate::client::ToolAnswer;
use crate::failure::CallFailure;
use crate::policy::ToolPolicy;

/// Runs one tool call: attempts until success, a business failure, or the policy gives up,
/// and always ends in a [`CallToolResult`] — the tool's own, or a sanitized [`LlmError`] with
/// `isError: true` (its JSON as the text and as structured content).
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
/// use steadfast::CancellationToken;
/// use steadfast_mcp::{CallFailure, ToolCall, ToolPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = ToolPolicy::default();
/// let result = ToolCall::new("weather", &policy)
///     .replays_ambiguous(true)
///     .run(&CancellationToken::new(), |attempt| async move {
///         if attempt == 1 {
///             Err(CallFailure::Lost(rmcp::ServiceError::TransportClosed))
///         } else {
///             Ok(CallToolResult::success(vec![ContentBlock::text("sunny")]))
///         }
///     })
///     .await;
/// assert_eq!(result.is_error, Some(false));
/// # }
/// ```
#[derive(Debug)]
pub struct ToolCall<'a> {
    tool: &'a str,
    call_id: Option<&'a str>,
    policy: &'a ToolPolicy,
    replay: bool,
    breaker: Option<CircuitBreaker>,
    budget: Option<RetryBudget>,
    metrics: Option<ToolMetrics>,
    seed: Option<u64>,
}

impl<'a> ToolCall<'a> {
    /// A call to `tool` under `policy`.
    ///
    /// See [`ToolCall`] for an example.
    pub fn new(tool: &'a str, policy: &'a ToolPolicy) -> Self {
        Self {
            tool,
            call_id: None,
            policy,
            replay: false,
            breaker: None,
            budget: None,
            metrics: None,
            seed: None,
        }
    }

    /// Whether ambiguous failures may be replayed (see [`ToolPolicy::replays_ambiguous`]).
    ///
    /// See [`ToolCall`] for an example.
    pub fn replays_ambiguous(mut self, yes: bool) -> Self {
        self.replay = yes;
        self
    }

    /// The id the model gave this tool call, recorded as `gen_ai.tool.call.id` on the call's
    /// `execute_tool` span (see [`steadfast::trace`]).
    ///
    /// ```
    /// let policy = steadfast_mcp::ToolPolicy::default();
    /// let call = steadfast_mcp::ToolCall::new("search", &policy).call_id(Some("call_7"));
    /// # let _ = call;
    /// ```
    pub fn call_id(mut self, id: Option<&'a str>) -> Self {
        self.call_id = id;
        self
    }

    /// Guards the call with a breaker.
    pub fn breaker(mut self, breaker: Option<CircuitBreaker>) -> Self {
        self.breaker = breaker;
        self
    }

    /// Draws retries from a budget.
    pub fn budget(mut self, budget: Option<RetryBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// Counts the call into `metrics`.
    pub fn metrics(mut self, metrics: Option<ToolMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Seeds the jitter, for reproducible tests.
    pub fn seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// Runs the call. `attempt(n)` makes attempt `n` (1-based) and returns the tool's result
    /// (including `isError` results) or why the attempt failed. Stops when `cancel` fires.
    ///
    /// See [`ToolCall`] for an example.
    pub async fn run<F, Fut>(self, cancel: &CancellationToken, mut attempt: F) -> CallToolResult
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<CallToolResult, CallFailure>>,
    {
        let answer = self
            .run_answer(cancel, |n| {
                let fut = attempt(n);
                async move { fut.await.map(ToolAnswer::Result) }
            })
            .await;
        match answer {
            ToolAnswer::Result(r) => r,
            // `attempt` only ever produces results.
            ToolAnswer::Other(_) => CallToolResult::success(vec![]),
        }
    }

    /// Like [`run`](Self::run), for attempts that may get an answer other than a tool result
    /// (a task handle, an input-required round): such an answer ends the call as it is,
    /// neither judged nor retried.
    ///
    /// ```
    /// use rmcp::model::{CallToolResult, ContentBlock};
    /// use steadfast::CancellationToken;
    /// use steadfast_mcp::{ToolAnswer, ToolCall, ToolPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let policy = ToolPolicy::default();
    /// let answer = ToolCall::new("t", &policy)
    ///     .run_answer(&CancellationToken::new(), |_| async {
    ///         Ok(ToolAnswer::Result(CallToolResult::success(vec![ContentBlock::text("ok")])))
    ///     })
    ///     .await;
    /// assert!(matches!(answer, ToolAnswer::Result(r) if r.is_error == Some(false)));
    /// # }
    /// ```
    pub async fn run_answer<F, Fut>(self, cancel: &CancellationToken, attempt: F) -> ToolAnswer
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<ToolAnswer, CallFailure>>,
    {
        let mode = self.policy.retry_on_is_error;
        self.run_judged(cancel, attempt, move |answer| match answer {
            ToolAnswer::Result(result) => match mode.judge(&result) {
                Some(class) => Err(CallFailure::Tool(Box::new(result), class)),
                // The tool's own `isError` text goes to the model: through the sanitizer.
                None => Ok(ToolAnswer::Result(sanitize_error_result(result))),
            },
            other => Ok(other),
        })
        .await
        .unwrap_or_else(|e| ToolAnswer::Result(llm_error_result(&e)))
    }

    /// The engine run over any answer type: `judge` turns an answer that is a failure (an
    /// `isError` result the policy retries) into a [`CallFailure`]. On giving up, the error the
    /// model should see. The proxy uses this over raw JSON results, so that nothing of the
    /// upstream's answer is lost to a typed decode.
    ///
    /// ```
    /// # async fn demo() {
    /// use steadfast_mcp::{CallFailure, ToolCall, ToolPolicy};
    /// let policy = ToolPolicy::default();
    /// let out: Result<u32, steadfast::LlmError> = ToolCall::new("t", &policy)
    ///     .run_judged(&Default::default(), |_| async { Ok::<_, CallFailure>(7) }, Ok)
    ///     .await;
    /// assert_eq!(out.unwrap(), 7);
    /// # }
    /// ```
    pub async fn run_judged<T, F, Fut, J>(
        self,
        cancel: &CancellationToken,
        mut attempt: F,
        judge: J,
    ) -> Result<T, LlmError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, CallFailure>>,
        J: Fn(T) -> Result<T, CallFailure>,
    {
        let replay = self.replay;
        let tool = self.tool.to_owned();
        let span = if steadfast::trace::listening() {
            steadfast::trace::execute_tool_span(self.tool, self.call_id)
        } else {
            tracing::Span::none()
        };
        let mut retry = Retry::<T, CallFailure>::new(self.policy.engine_policy().clone())
            .name(self.tool.to_owned())
            // This call opens the span, so that a replay held back lands on it too.
            .in_caller_span()
            // Retries are what an operator wants to see at -v: one line each, no error text
            // that has not been through the sanitizer.
            .on_retry(move |ev| {
                tracing::info!(
                    tool = %tool,
                    attempt = ev.attempt,
                    delay_ms = ev.delay.as_millis() as u64,
                    code = ev.class.code.as_str(),
                    message = %steadfast::sanitize(ev.class.message.as_deref().unwrap_or("")),
                    "retrying"
                );
            });
        // A call that may replay anything needs no veto (and its allocation).
        if !replay {
            retry = retry
                .should_retry(|e: &CallFailure, _| e.never_ran())
                // Counted as what the model is told (`final_error`), not as the failure the
                // engine stopped on: the health tool and the metrics say OUTCOME_UNKNOWN too.
                .reports_as(|ev| {
                    let failure = match ev.failed {
                        steadfast::Failed::Error(e) => Some(e),
                        _ => None,
                    };
                    let timed_out = matches!(ev.failed, steadfast::Failed::Timeout(_));
                    ambiguous(ev.reason, failure, timed_out)
                        .then_some(steadfast::LlmErrorCode::OutcomeUnknown)
                });
        }
        if let Some(b) = self.breaker {
            retry = retry.breaker(b);
        }
        if let Some(b) = self.budget {
            retry = retry.budget(b);
        }
        if let Some(m) = self.metrics {
            retry = retry.metrics(m);
        }
        if let Some(s) = self.seed {
            retry = retry.seed(s);
        }
        let judge = &judge;
        let tool = self.tool;
        async move {
            retry
                .cancel_on(cancel)
                .run(|n| {
                    let fut = attempt(n);
                    async move { judge(fut.await?) }
                })
                .await
                .map_err(|e| final_error(tool, &e, replay))
        }
        .instrument(span)
        .await
    }
}

/// The text blocks and structured content of an `isError` result, sanitized (a success is the
/// data the model asked for and passes untouched). Text that is a JSON object or array is
/// sanitized as JSON: escaped quotes and `\n` would hide secrets and stack frames from a scan of
/// the text.
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
/// let r = CallToolResult::error(vec![ContentBlock::text("login failed: password=hunter2")]);
/// let r = steadfast_mcp::sanitize_error_result(r);
/// assert_eq!(steadfast_mcp::tool_result_text(&r), "login failed: password=[redacted]");
/// ```
pub fn sanitize_error_result(mut result: CallToolResult) -> CallToolResult {
    if result.is_error != Some(true) {
        return result;
    }
    for block in &mut result.content {
        if let ContentBlock::Text(t) = block {
            let as_json = serde_json::from_str::<serde_json::Value>(&t.text)
                .ok()
                .filter(|v| v.is_object() || v.is_array());
            if let Some(v) = as_json {
                t.text = steadfast::sanitize_json(&v).to_string();
            } else if let std::borrow::Cow::Owned(clean) = steadfast::sanitize(&t.text) {
                t.text = clean;
            }
        }
    }
    if let Some(s) = &mut result.structured_content {
        *s = steadfast::sanitize_json(s);
    }
    result
}

fn final_error(tool: &str, e: &RetryError<CallFailure>, replay: bool) -> LlmError {
    let llm = e.to_llm_error(tool);
    if replay || !sent_and_ambiguous(e) {
        return llm;
    }
    // Not repeated because it may not be replayed: whatever the failure looked like, the model
    // must not be invited to repeat it blindly either.
    let then = match e.failure() {
        Failure::Timeout { .. } => "timed out".to_owned(),
        Failure::Error(CallFailure::Lost(_)) if llm.code == steadfast::LlmErrorCode::Timeout => {
            "timed out".to_owned()
        }
        Failure::Error(CallFailure::Lost(_)) => "the connection was lost".to_owned(),
        _ => format!(
            "failed with an error that may be transient ({}: {})",
            llm.code,
            llm.message.trim_end_matches('.')
        ),
    };
    let code = steadfast::LlmErrorCode::OutcomeUnknown;
    tracing::info!(
        steadfast.attempts = i64::from(e.attempts()),
        steadfast.reason = e.class().code.as_str(),
        steadfast.give_up_reason = e.reason().as_str(),
        "steadfast.replay.held_back"
    );
    if steadfast::trace::listening() {
        steadfast::trace::record_error(&tracing::Span::current(), code.as_str());
    }
    let mut unknown = LlmError::new(code);
    unknown.message = format!(
        "The outcome of this call is unknown: it was sent to the tool and then {then}. It was not \
         retried automatically because the tool is not marked read-only or idempotent"
    );
    unknown.tool = llm.tool;
    unknown.attempts_made = llm.attempts_made;
    unknown
}

/// Whether the call gave up on a failure that left its outcome open — the request went out
/// (not a refusal before sending, not a call limit) and the engine stopped for a reason other
/// than the failure itself (a caller error) or the caller's cancellation.
fn sent_and_ambiguous(e: &RetryError<CallFailure>) -> bool {
    let (failure, timed_out) = match e.failure() {
        Failure::Error(f) => (Some(f), false),
        Failure::Timeout { .. } => (None, true),
        _ => (None, false),
    };
    ambiguous(e.reason(), failure, timed_out)
}

/// [`sent_and_ambiguous`] over its parts, as the engine's give-up hook sees them too.
fn ambiguous(reason: GiveUpReason, failure: Option<&CallFailure>, timed_out: bool) -> bool {
    let sent = match failure {
        Some(f) => !f.never_ran() && !matches!(f, CallFailure::Limited(_)),
        None => timed_out,
    };
    sent && !matches!(reason, GiveUpReason::NonRetriable | GiveUpReason::Cancelled)
}

/// A `CallToolResult` with `isError: true` carrying `error`: its JSON as the text (what every
/// client shows the model) and as structured content (for clients that read it).
///
/// ```
/// use steadfast::{LlmError, LlmErrorCode};
/// let r = steadfast_mcp::llm_error_result(&LlmError::new(LlmErrorCode::Timeout).with_tool("search"));
/// assert_eq!(r.is_error, Some(true));
/// assert_eq!(r.structured_content.unwrap()["code"], "TIMEOUT");
/// ```
pub fn llm_error_result(error: &LlmError) -> CallToolResult {
    let json = error.to_json();
    let mut r = CallToolResult::error(vec![ContentBlock::text(json.to_string())]);
    r.structured_content = Some(json);
    r
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorData;
    use steadfast::{LlmErrorCode, RetryPolicy};

    use super::*;

    /// The error a call ends with when every attempt fails with `failure()`.
    async fn ends_with(
        replay: bool,
        attempts: u32,
        failure: fn() -> CallFailure,
    ) -> (LlmError, u32) {
        let retry = RetryPolicy::builder()
            .max_attempts(attempts)
            .base_delay(std::time::Duration::from_millis(1))
            .build()
            .unwrap();
        let policy = ToolPolicy::new(retry).unwrap();
        let sent = std::sync::atomic::AtomicU32::new(0);
        let metrics = steadfast::ToolMetrics::new("charge");
        let e = ToolCall::new("charge", &policy)
            .replays_ambiguous(replay)
            .metrics(Some(metrics.clone()))
            .run_judged(
                &CancellationToken::new(),
                |_| {
                    sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    async move { Err::<(), _>(failure()) }
                },
                Ok,
            )
            .await
            .unwrap_err();
        // The health tool and the metrics count the code the model is told, whatever it is.
        let counted = metrics.snapshot().failures;
        assert_eq!(
            counted.into_iter().collect::<Vec<_>>(),
            [(e.code, 1)],
            "counted as told: {e:?}"
        );
        (e, sent.into_inner())
    }

    #[tokio::test(start_paused = true)]
    async fn every_ambiguous_failure_not_replayed_is_outcome_unknown() {
        let rpc = || CallFailure::Rpc(ErrorData::internal_error("db unavailable", None));
        let lost = || CallFailure::Lost(rmcp::ServiceError::TransportClosed);
        let tool = || {
            let class = steadfast::ErrorClass::from_status(503);
            CallFailure::Tool(Box::new(CallToolResult::error(vec![])), class)
        };
        for (what, failure) in [
            ("rpc", rpc as fn() -> CallFailure),
            ("lost", lost),
            ("tool", tool),
        ] {
            // Declined (a retry was allowed) and exhausted (none was): the same truth.
            for attempts in [3, 1] {
                let (e, sent) = ends_with(false, attempts, failure).await;
                assert_eq!(sent, 1, "{what}");
                assert_eq!(
                    (e.code, e.retriable),
                    (LlmErrorCode::OutcomeUnknown, false),
                    "{what}: {e:?}"
                );
                assert!(
                    e.message.starts_with("The outcome of this call is unknown"),
                    "{e:?}"
                );
                assert!(
                    e.suggestion.contains("before calling the tool again"),
                    "{e:?}"
                );
                assert_eq!(
                    (e.tool.as_deref(), e.attempts_made),
                    (Some("charge"), Some(1))
                );
            }
            // A tool that may be replayed is, and ends as its last failure says.
            let (e, sent) = ends_with(true, 3, failure).await;
            assert_eq!(sent, 3, "{what}");
            assert!(
                e.retriable && e.code != LlmErrorCode::OutcomeUnknown,
                "{what}: {e:?}"
            );
        }
        // Never sent: safe to call again, whatever the tool.
        let (e, sent) = ends_with(false, 2, || CallFailure::NotSent("down".into())).await;
        assert_eq!((e.code, sent), (LlmErrorCode::ServiceUnavailable, 2));
        // A caller error is not ambiguous: the server refused the call.
        let bad = || CallFailure::Rpc(ErrorData::invalid_params("'amount' is required", None));
        let (e, sent) = ends_with(false, 3, bad).await;
        assert_eq!((e.code, sent), (LlmErrorCode::InvalidRequest, 1));
    }
}
