#!/usr/bin/env python3
"""The Python MCP SDK's streamable-HTTP client through `steadfast proxy --listen` (URL in argv[1]):
a tool call that reports progress, and one whose server asks the client for its roots (both
answered by the proxy as streams of events on the call's POST). Prints one JSON line:
{"progress": [...], "slow": text, "roots_asked": n, "ask": text}.

Works with mcp 1.x (`streamablehttp_client`) and 2.x (`streamable_http_client`). Every wait is
bounded (30 s).
"""

import json
import sys

import anyio
from mcp import ClientSession, types

try:
    from mcp.client.streamable_http import streamable_http_client as connect
except ImportError:  # mcp before 1.2x
    from mcp.client.streamable_http import streamablehttp_client as connect


async def main(url):
    progress = []
    asked = []

    async def on_progress(value, total, message):
        progress.append(value)

    async def roots(context):
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri="file:///sdk", name="sdk")])

    with anyio.fail_after(30):
        async with connect(url) as streams:
            async with ClientSession(streams[0], streams[1], list_roots_callback=roots) as s:
                await s.initialize()
                slow = await s.call_tool(
                    "slow", {"seconds": 0.3, "steps": 3}, progress_callback=on_progress
                )
                ask = await s.call_tool("ask", {"method": "roots/list"})
    print(json.dumps({
        "progress": progress,
        "slow": slow.content[0].text,
        "roots_asked": len(asked),
        "ask": ask.content[0].text,
    }))


anyio.run(main, sys.argv[1])
