#!/usr/bin/env python3
"""The Python SDK 2.x client with an elicitation callback, through the gateway: connects in
MODE, calls TOOL with ARGS (JSON) — a tool whose server elicits while it works — answering the
elicitation with `{"name": NAME, "check": true}` (accept), and prints one JSON line with the
messages it was asked and the tool's result text. In a modern MODE the elicitation comes
embedded in an `input_required` result (the SDK's client retries); in `legacy` as a request.

  mrtr_client.py MODE TOOL ARGS NAME URL
  mrtr_client.py MODE TOOL ARGS NAME -- COMMAND [ARGS...]
"""

import json
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import ElicitResult


async def main() -> None:
    mode, tool, args, name = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    if sys.argv[5] == "--":
        target = StdioServerParameters(command=sys.argv[6], args=sys.argv[7:])
    else:
        target = sys.argv[5]
    asked = []

    async def elicit(ctx, params):
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": name, "check": True})

    out = {}
    with anyio.fail_after(60):
        async with Client(target, mode=mode, elicitation_callback=elicit) as c:
            out["protocol_version"] = c.protocol_version
            r = await c.call_tool(tool, args)
            out["text"] = [getattr(b, "text", None) for b in r.content]
            out["is_error"] = bool(r.is_error)
    out["asked"] = asked
    print(json.dumps(out), flush=True)


anyio.run(main)
