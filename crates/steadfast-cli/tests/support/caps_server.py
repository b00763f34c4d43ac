#!/usr/bin/env python3
"""A handshake-era MCP server on stdio (standard library only) whose tools depend on the
client's declared capabilities, as server-everything's do: `echo` always, `get-roots-list` when
the client declared `roots`, `trigger-elicitation-request` when it declared form-mode
elicitation (`elicitation: {}` or `{form: ...}`), `trigger-url-elicitation` when it declared
`elicitation.url`, `trigger-sampling-request` when it declared `sampling`.
"""

import json
import sys


def tools_for(caps: dict) -> list:
    names = ["echo"]
    if "roots" in caps:
        names.append("get-roots-list")
    elicitation = caps.get("elicitation")
    if isinstance(elicitation, dict):
        if not elicitation or "form" in elicitation:
            names.append("trigger-elicitation-request")
        if "url" in elicitation:
            names.append("trigger-url-elicitation")
    if "sampling" in caps:
        names.append("trigger-sampling-request")
    return [{"name": n, "inputSchema": {"type": "object"}} for n in names]


def main() -> None:
    caps = {}
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg or "method" not in msg:
            continue
        method, rid = msg["method"], msg["id"]
        if method == "initialize":
            caps = (msg.get("params") or {}).get("capabilities") or {}
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "caps-server", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": tools_for(caps)}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "ok"}]}
        elif method == "ping":
            result = {}
        else:
            out = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}}
            print(json.dumps(out), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)


main()
