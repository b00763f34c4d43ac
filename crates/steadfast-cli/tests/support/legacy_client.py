#!/usr/bin/env python3
"""A handshake-era client (the Python MCP SDK 1.30: `initialize`, MCP 2025-11-25) through the
gateway: lists the tools, calls `echo` and `era`, prints one JSON line with what it saw.

  legacy_client.py URL
  legacy_client.py -- COMMAND [ARGS...]
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


async def session_run(read, write, out):
    async with ClientSession(read, write) as s:
        init = await s.initialize()
        out["protocol_version"] = init.protocolVersion
        out["server_name"] = init.serverInfo.name
        tools = [t.name for t in (await s.list_tools()).tools]
        out["tools"] = tools
        r = await s.call_tool("echo", {"text": "from 2025"})
        out["echo"] = [getattr(b, "text", None) for b in r.content]
        if "era" in tools:
            out["era"] = (await s.call_tool("era", {})).content[0].text


async def main() -> None:
    out = {}
    with anyio.fail_after(60):
        if sys.argv[1] == "--":
            params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
            async with stdio_client(params) as (read, write):
                await session_run(read, write, out)
        else:
            async with streamablehttp_client(sys.argv[1]) as (read, write, _):
                await session_run(read, write, out)
    print(json.dumps(out), flush=True)


anyio.run(main)
