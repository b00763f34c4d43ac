//! rig tools under a Steadfast [`Guard`].
//!
//! rig retries model turns, not tool calls: a tool that fails once hands its error straight to
//! the model. rig's [`ToolExecutionError`] already says a lot about the failure — a normalized
//! [`ToolErrorKind`], a `retryable` hint, sometimes the HTTP status — so the classification
//! here reads those instead of guessing from text: the status decides when there is one, the
//! kind otherwise, and a `retryable` hint the tool set explicitly (one that differs from its
//! kind's default) overrides both. A `Retry-After` travels only as an [`ErrorClass`] in the
//! error's source chain (rig has no field for it).
//!
//! When the guard gives up, the tool fails with a [`ToolExecutionError`] whose model-visible
//! output is the sanitized [`LlmError`](steadfast::LlmError) JSON, whose operator message is
//! that error's one-line form, and whose source is the tool's original error.
//!
//! [`ToolErrorKind`]: rig_core::tool::ToolErrorKind

use std::error::Error as _;
use std::fmt;

use rig_core::tool::{
    DynamicTool, IntoToolOutput, Tool, ToolContext, ToolErrorKind, ToolExecutionError, ToolOutput,
};
use serde_json::Value;
use steadfast::{
    Classify, ErrorClass, ErrorCode, ErrorKind, Failure, Limited, LlmErrorCode, RetryError,
    classify_chain, classify_message,
};

use crate::Guard;

/// A rig [`ToolExecutionError`], classified for the retry engine.
///
/// ```
/// use rig_core::tool::ToolExecutionError;
/// use steadfast::{Classify, ErrorKind};
/// use steadfast_agents::rig::RigError;
///
/// assert_eq!(RigError(ToolExecutionError::network("reset")).classify().kind, ErrorKind::Retriable);
/// assert_eq!(RigError(ToolExecutionError::invalid_args("no city")).classify().kind, ErrorKind::NonRetriable);
/// let busy = ToolExecutionError::provider("upstream").with_http_status(503);
/// assert_eq!(RigError(busy).classify().status, Some(503));
/// // The tool's explicit verdict wins over its kind's default.
/// let final_timeout = ToolExecutionError::timeout("deadline passed").with_retryable(false);
/// assert_eq!(RigError(final_timeout).classify().kind, ErrorKind::NonRetriable);
/// ```
#[derive(Debug, Clone)]
pub struct RigError(pub ToolExecutionError);

impl fmt::Display for RigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.message())
    }
}

impl std::error::Error for RigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl Classify for RigError {
    fn classify(&self) -> ErrorClass {
        let e = &self.0;
        let mut class = match e.http_status() {
            Some(status) => ErrorClass::from_status(status),
            None => by_kind(e),
        };
        // A Retry-After can only ride in the source chain, as an ErrorClass.
        if let Some(after) = e.source().and_then(|s| classify_chain(s).retry_after) {
            class = class.with_retry_after(after);
        }
        // An explicit verdict from the tool (one that differs from its kind's default).
        if e.retryable() != e.kind().default_retryable() {
            match e.retryable() {
                Some(true) if !class.kind.is_transient() => {
                    class.kind = ErrorKind::Retriable;
                }
                Some(false) if class.kind.is_transient() || class.kind == ErrorKind::Unknown => {
                    class.kind = ErrorKind::NonRetriable;
                }
                _ => {}
            }
        }
        if e.is_refusal() {
            class = ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR).with_breaker_failure(false);
        }
        class.with_message(e.message().to_owned())
    }
}

fn by_kind(e: &ToolExecutionError) -> ErrorClass {
    match e.kind() {
        ToolErrorKind::InvalidArgs | ToolErrorKind::NotFound | ToolErrorKind::PermissionDenied => {
            ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR)
        }
        ToolErrorKind::Timeout => ErrorClass::timeout(),
        ToolErrorKind::Cancelled => ErrorClass::cancelled(),
        ToolErrorKind::RateLimited => {
            ErrorClass::new(ErrorKind::RateLimited, ErrorCode::RATE_LIMITED)
        }
        ToolErrorKind::Network => ErrorClass::retriable(ErrorCode::NETWORK_ERROR),
        // Provider and Other say nothing on their own: ask the source, then the message.
        _ => {
            let from_source = e.source().map(classify_chain);
            match from_source {
                Some(c) if c.kind != ErrorKind::Unknown => c,
                _ => match (classify_message(e.message()), e.kind()) {
                    (Some(c), _) => c,
                    (None, ToolErrorKind::Provider) => {
                        ErrorClass::retriable(ErrorCode::SERVER_ERROR)
                    }
                    (None, _) => ErrorClass::unknown(),
                },
            }
        }
    }
}

/// The error rig receives when the guard gave up on `tool`: the sanitized `LlmError` as the
/// model-visible output, the original error as the source.
pub(crate) fn give_up(tool: &str, err: &RetryError<Limited<RigError>>) -> ToolExecutionError {
    let llm = err.to_llm_error(tool);
    let original = match err.failure() {
        Failure::Error(Limited::Failed(RigError(e))) => Some(e),
        _ => None,
    };
    let kind = original.map_or_else(
        || match llm.code {
            LlmErrorCode::Timeout => ToolErrorKind::Timeout,
            LlmErrorCode::RateLimited => ToolErrorKind::RateLimited,
            LlmErrorCode::ServiceUnavailable | LlmErrorCode::CircuitOpen => ToolErrorKind::Provider,
            LlmErrorCode::Cancelled => ToolErrorKind::Cancelled,
            LlmErrorCode::ToolCallLimit => ToolErrorKind::PermissionDenied,
            _ => ToolErrorKind::Other,
        },
        ToolExecutionError::kind,
    );
    let mut out = match original {
        Some(e) if e.is_refusal() => ToolExecutionError::refused(llm.to_string()),
        _ => ToolExecutionError::new(kind, llm.to_string()),
    }
    .with_model_output(ToolOutput::json(llm.to_json()))
    .with_retryable(llm.retriable)
    .with_code(llm.code.as_str());
    if let Some(status) = err.class().status {
        out = out.with_http_status(status);
    }
    if let Some(e) = original {
        out = out.with_source(e.clone());
    }
    out
}

/// Parses one attempt's arguments as rig does: JSON `null` reads as `{}`.
fn parse_args<A: serde::de::DeserializeOwned>(args: &Value) -> Result<A, ToolExecutionError> {
    serde_json::from_value(args.clone())
        .or_else(|e| match args {
            Value::Null => serde_json::from_value(Value::Object(Default::default())).map_err(|_| e),
            _ => Err(e),
        })
        .map_err(|e| {
            ToolExecutionError::invalid_args(format!("failed to parse tool arguments: {e}"))
        })
}

/// A rig [`Tool`] whose calls run under a [`Guard`]. Build one with [`Guard::rig`].
///
/// It keeps the tool's name, description and schema; its arguments are the raw JSON (each
/// attempt decodes them afresh) and its output rig's [`ToolOutput`]. Each attempt runs on a
/// copy of the call's [`ToolContext`] (rig's own `for_dispatch` snapshot); the result metadata
/// of the attempt that succeeded is published back.
#[derive(Debug, Clone)]
pub struct Resilient<T> {
    tool: T,
    guard: Guard,
}

impl<T> Resilient<T> {
    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }
}

impl<T: Tool + 'static> Tool for Resilient<T> {
    const NAME: &'static str = T::NAME;
    type Args = Value;
    type Output = ToolOutput;
    type Error = ToolExecutionError;

    fn description(&self) -> String {
        self.tool.description()
    }

    fn parameters(&self) -> Value {
        self.tool.parameters()
    }

    async fn call(
        &self,
        context: &mut ToolContext,
        args: Value,
    ) -> Result<ToolOutput, ToolExecutionError> {
        let snapshot = context.for_dispatch();
        let outcome = self
            .guard
            .run(T::NAME, |_| {
                let (args, mut ctx) = (&args, snapshot.for_dispatch());
                async move {
                    let parsed = parse_args::<T::Args>(args).map_err(RigError)?;
                    let out = self
                        .tool
                        .call(&mut ctx, parsed)
                        .await
                        .map_err(|e| RigError(self.tool.map_error(e)))?;
                    let out = out.into_tool_output().map_err(RigError)?;
                    Ok((out, ctx))
                }
            })
            .await;
        match outcome {
            Ok((out, ctx)) => {
                context.accept_dispatch_result(ctx);
                Ok(out)
            }
            Err(e) => Err(give_up(T::NAME, &e)),
        }
    }
}

impl Guard {
    /// Wraps a typed rig tool: `agent.tool(guard.rig(Weather))`.
    ///
    /// ```
    /// use rig_core::tool::{PortableTool, Tool, ToolContext, ToolExecutionError};
    /// use serde_json::{Value, json};
    /// use steadfast_agents::Guard;
    ///
    /// struct Weather;
    /// impl PortableTool for Weather {
    ///     const NAME: &'static str = "weather";
    ///     type Args = Value;
    ///     type Output = String;
    ///     type Error = ToolExecutionError;
    ///     fn description(&self) -> String { "Forecast".into() }
    ///     fn parameters(&self) -> Value { json!({"type": "object"}) }
    ///     async fn call(&self, _args: Value) -> Result<String, ToolExecutionError> {
    ///         Err(ToolExecutionError::invalid_args("unknown city `Atlantis`"))
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let tool = Guard::default().rig(Weather);
    /// let err = tool.call(&mut ToolContext::new(), json!({})).await.unwrap_err();
    /// let seen: Value = serde_json::to_value(err.model_output()).unwrap();
    /// assert!(seen.to_string().contains("INVALID_REQUEST"));
    /// # }
    /// ```
    pub fn rig<T: Tool>(&self, tool: T) -> Resilient<T> {
        Resilient {
            tool,
            guard: self.clone(),
        }
    }

    /// Wraps a runtime-defined rig tool, keeping its definition.
    pub fn rig_dynamic(&self, tool: DynamicTool) -> DynamicTool {
        let definition = tool.definition();
        let name = definition.name.to_string();
        let guard = self.clone();
        DynamicTool::new_with_context(
            definition.name,
            definition.description,
            definition.parameters,
            move |context: &mut ToolContext, args: Value| {
                let (tool, guard, name) = (tool.clone(), guard.clone(), name.clone());
                let snapshot = context.for_dispatch();
                Box::pin(async move {
                    let outcome = guard
                        .run(&name, |_| {
                            let (tool, args, mut ctx) =
                                (&tool, args.clone(), snapshot.for_dispatch());
                            async move {
                                let out =
                                    tool.execute_with(&mut ctx, args).await.map_err(RigError)?;
                                Ok((out, ctx))
                            }
                        })
                        .await;
                    match outcome {
                        Ok((out, ctx)) => {
                            context.accept_dispatch_result(ctx);
                            Ok(out)
                        }
                        Err(e) => Err(give_up(&name, &e)),
                    }
                })
            },
        )
    }

    /// Wraps a whole tool set in one line: `agent.dynamic_tools(guard.rig_all(tools))`.
    pub fn rig_all(&self, tools: impl IntoIterator<Item = DynamicTool>) -> Vec<DynamicTool> {
        tools.into_iter().map(|t| self.rig_dynamic(t)).collect()
    }
}
