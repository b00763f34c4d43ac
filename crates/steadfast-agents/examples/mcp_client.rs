//! Resilient calls from an rmcp client to the repo's unreliable example server:
//! `cargo build -p steadfast-cli && cargo run -p steadfast-agents --features rmcp --example mcp_client`
//! (the server is the `steadfast` binary: `STEADFAST_BIN`, else `target/debug/steadfast`).

use rmcp::model::CallToolRequestParams;
use steadfast_agents::Guard;
use steadfast_agents::mcp::McpTools;
use steadfast_mcp::{Reconnecting, Upstream, tool_result_text};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bin = std::env::var("STEADFAST_BIN").unwrap_or_else(|_| "target/debug/steadfast".into());
    let conn = Reconnecting::builder(Upstream::command(bin, ["example-server"]), || ())
        .connect()
        .await?;
    let tools = McpTools::reconnecting(&conn).guard(
        Guard::builder()
            .default_dependency("example-server")
            .build(),
    );
    for tool in ["flaky_search", "strict", "read_file"] {
        let r = tools.call_tool(CallToolRequestParams::new(tool)).await;
        println!("{tool}: isError={:?} {}", r.is_error, tool_result_text(&r));
    }
    conn.shutdown();
    Ok(())
}
