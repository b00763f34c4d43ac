#!/usr/bin/env python3
"""The Python MCP SDK's client (mcp 1.30.0) calling `echo` through `steadfast proxy` with a W3C
`traceparent` in the request's `_meta` (as the OpenTelemetry MCP conventions propagate it).

Usage: otel_sdk_client.py STEADFAST CONFIG TRACEPARENT
The proxy inherits this process's environment (the OTEL_* variables of the test). Prints one JSON
line: {"text": the tool's answer}. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    steadfast, config, traceparent = sys.argv[1:4]
    params = StdioServerParameters(
        command=steadfast, args=["proxy", "--config", config], env=dict(os.environ)
    )
    with anyio.fail_after(30):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(
                    "echo",
                    {"text": "traced"},
                    meta={"traceparent": traceparent, "tracestate": "sdk=1"},
                )
    print(json.dumps({"text": result.content[0].text}))


if __name__ == "__main__":
    anyio.run(main)
