#!/usr/bin/env python3
"""The Python SDK 2.x client's `Client.listen` through the gateway: connects in MODE, opens a
listen for tools list changes and updates of `note://a`, calls the server's `touch` tool (which
announces both) until both events arrived (once is enough when the acknowledgment means the
URI is watched all the way up), and prints one JSON line with the acknowledged filter, the
events in the order they came and how many calls of `touch` it took.

  listen_client.py MODE URL
  listen_client.py MODE -- COMMAND [ARGS...]
"""

import json
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged


async def main() -> None:
    mode = sys.argv[1]
    if sys.argv[2] == "--":
        target = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
    else:
        target = sys.argv[2]
    out = {"events": []}
    with anyio.fail_after(60):
        async with Client(target, mode=mode) as c:
            out["protocol_version"] = c.protocol_version
            caps = c.server_capabilities
            out["tools_list_changed"] = bool(caps.tools and caps.tools.list_changed)
            out["resources_subscribe"] = bool(caps.resources and caps.resources.subscribe)
            async with c.listen(tools_list_changed=True, resource_subscriptions=["note://a"]) as sub:
                out["honored"] = sub.honored.model_dump(by_alias=True, exclude_none=True)
                seen = set()
                out["touches"] = 0
                for _ in range(20):
                    await c.call_tool("touch", {})
                    out["touches"] += 1
                    with anyio.move_on_after(1):
                        async for ev in sub:
                            name = type(ev).__name__
                            if isinstance(ev, ResourceUpdated):
                                name += " " + ev.uri
                            out["events"].append(name)
                            seen.add(type(ev))
                            if seen == {ToolsListChanged, ResourceUpdated}:
                                break
                    if seen == {ToolsListChanged, ResourceUpdated}:
                        break
    print(json.dumps(out), flush=True)


anyio.run(main)
