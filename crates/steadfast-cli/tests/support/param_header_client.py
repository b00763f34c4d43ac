#!/usr/bin/env python3
"""The Python SDK 2.x client calls `region` (param_header_server.py's tool, whose `region`
argument is mirrored into the `Mcp-Param-Region` header) through the gateway, in MODE, and
prints one JSON line: the protocol version, the call's text and whether it is an error.

  param_header_client.py MODE URL
  param_header_client.py MODE -- COMMAND [ARGS...]
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
    with anyio.fail_after(60):
        async with Client(target, mode=mode) as c:
            await c.list_tools()
            r = await c.call_tool("region", {"region": "eu-west", "text": "hi"})
            print(json.dumps({
                "protocol_version": c.protocol_version,
                "text": [getattr(b, "text", None) for b in r.content],
                "is_error": bool(r.is_error),
            }))


if __name__ == "__main__":
    anyio.run(main)
