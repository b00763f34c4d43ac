#!/usr/bin/env python3
"""The Python SDK 2.x client through the gateway: connects in MODE (`auto`: probe with
server/discover, fall back to initialize; `2026-07-28`: modern only; `legacy`), lists the
tools, calls `echo` (and `era` when listed), and prints one JSON line with what it saw.

  modern_client.py MODE URL
  modern_client.py MODE -- COMMAND [ARGS...]
"""

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode = sys.argv[1]
    if sys.argv[2] == "--":
        target = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
    else:
        target = sys.argv[2]
    out = {}
    with anyio.fail_after(60):
        async with Client(target, mode=mode) as c:
            out["protocol_version"] = c.protocol_version
            info = c.server_info
            out["server_name"] = info.name if info is not None else None
            out["tools_capability"] = c.server_capabilities.tools is not None
            listed = (await c.list_tools()).tools
            tools = [t.name for t in listed]
            out["tools"] = tools
            echo = next(t for t in listed if t.name == "echo")
            key = "message" if "message" in (echo.input_schema.get("properties") or {}) else "text"
            r = await c.call_tool("echo", {key: "through steadfast"})
            out["echo"] = [getattr(b, "text", None) for b in r.content]
            out["echo_is_error"] = bool(r.is_error)
            if "era" in tools:
                r = await c.call_tool("era", {})
                out["era"] = r.content[0].text
    print(json.dumps(out), flush=True)


anyio.run(main)
