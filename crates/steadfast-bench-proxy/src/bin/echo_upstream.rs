//! A minimal MCP server on stdio for benchmarks: answers `initialize`, `tools/list`, `ping`
//! and `tools/call` (an echo) as fast as one thread can. Output is flushed only when no more
//! input is already buffered, so a burst of requests is answered in one write.

use std::io::{BufRead, BufReader, BufWriter, Write};

use serde_json::{Value, json};

fn main() {
    let stdin = std::io::stdin();
    let mut input = BufReader::with_capacity(1 << 16, stdin.lock());
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) else {
            continue; // notifications and responses need no answer
        };
        let result = match msg["method"].as_str().unwrap_or("") {
            "initialize" => json!({
                "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo-upstream", "version": "0"}
            }),
            "tools/list" => json!({"tools": [{
                "name": "echo",
                "description": "Returns its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                "annotations": {"readOnlyHint": true}
            }]}),
            "ping" => json!({}),
            "tools/call" => {
                let text = &msg["params"]["arguments"]["text"];
                json!({"content": [{"type": "text", "text": text}]})
            }
            other => {
                let e = json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("Method not found: {other}")}});
                if write_line(&mut out, &e, input.buffer().is_empty()).is_err() {
                    return;
                }
                continue;
            }
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if write_line(&mut out, &answer, input.buffer().is_empty()).is_err() {
            return;
        }
    }
}

fn write_line(out: &mut impl Write, v: &Value, flush: bool) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    out.write_all(b"\n")?;
    if flush {
        out.flush()?;
    }
    Ok(())
}
