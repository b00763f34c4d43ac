//! A rig agent whose flaky tool is retried under Steadfast, driven by rig's scripted model, so
//! it runs without an API key: `cargo run -p steadfast-agents --features rig --example rig_agent`.

use std::sync::atomic::{AtomicU32, Ordering};

use rig_agent::agent::AgentBuilder;
use rig_agent::completion::Message;
use rig_agent::test_utils::{MockCompletionModel, MockTurn};
use rig_core::tool::{PortableTool, ToolExecutionError};
use serde_json::{Value, json};
use steadfast::RetryPolicy;
use steadfast_agents::Guard;

/// A forecast API that answers 503 twice before it answers.
#[derive(Default)]
struct Weather(AtomicU32);

impl PortableTool for Weather {
    const NAME: &'static str = "weather";
    type Args = Value;
    type Output = String;
    type Error = ToolExecutionError;

    fn description(&self) -> String {
        "Today's forecast for a city".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}})
    }
    async fn call(&self, args: Value) -> Result<String, ToolExecutionError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        println!("  weather: attempt {n}");
        if n < 3 {
            return Err(
                ToolExecutionError::provider("forecast API overloaded").with_http_status(503)
            );
        }
        Ok(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let guard = Guard::builder()
        .policy(RetryPolicy::builder().max_attempts(3).build()?)
        .build();
    // The scripted model asks for the forecast, then answers with what the tool said.
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call-1", "weather", json!({"city": "Lisbon"})),
        MockTurn::text("It is sunny in Lisbon."),
    ]);
    let agent = AgentBuilder::new(model.clone())
        .tool(guard.rig(Weather::default()))
        .build();
    agent
        .prompt(Message::user("Weather in Lisbon?"))
        .max_turns(3)
        .run()
        .await?;
    let seen = serde_json::to_string(&model.requests()[1].chat_history)?;
    println!(
        "the model read the tool result: {}",
        seen.contains("sunny in Lisbon")
    );
    Ok(())
}
