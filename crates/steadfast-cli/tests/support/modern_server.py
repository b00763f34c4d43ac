#!/usr/bin/env python3
"""A modern-only MCP server (MCP 2026-07-28) on stdio, built with the Python SDK 2.x.

The SDK's stdio server is dual-era (the client's first request locks the connection's era);
this one serves the modern per-request loop only (`_serve_modern_stream`, what the dual-era
loop uses once a connection opened modern), so `initialize` is refused with -32022 and a
request without the `_meta` envelope is refused too: a gateway that does not speak the new
revision cannot use it at all. Tools: `echo` (its text), `era` (the protocol version the
request was served at), `slow` (sleeps, then answers), `touch` (announces a tools list change
and an update of the resource `note://a` to `subscriptions/listen` streams, which the SDK
serves), `ask_name` (asks the client for a name with an elicitation embedded in an
`input_required` result, the revision's multi round-trip request, and greets it).
"""

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from mcp.server.runner import _serve_modern_stream
from mcp.server.stdio import stdio_server

mcp = MCPServer("modern-only-python", instructions="A modern-only test server.")


@mcp.tool()
async def echo(text: str) -> str:
    """Returns its text."""
    return text


@mcp.tool()
async def era(ctx: Context) -> str:
    """The protocol version this request was served at."""
    return str(ctx.request_context.protocol_version)


@mcp.tool()
async def touch(ctx: Context) -> str:
    """Announces a tools list change and an update of note://a to listeners."""
    await ctx.notify_tools_changed()
    await ctx.notify_resource_updated("note://a")
    return "touched"


@mcp.tool()
async def ask_name(ctx: Context) -> str | InputRequiredResult:
    """Asks the client for a name (an input request), then greets it."""
    answers = ctx.input_responses or {}
    answer = answers.get("name")
    if answer is not None and getattr(answer, "action", None) == "accept":
        return f"hello {(answer.content or {}).get('name')} (state {ctx.request_state})"
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return InputRequiredResult(
        input_requests={"name": ElicitRequest(params=ElicitRequestFormParams(
            message="your name?", requested_schema=schema))},
        request_state="asked-once",
    )


@mcp.resource("note://a")
def note() -> str:
    """A note that `touch` says was updated."""
    return "a note"


async def main() -> None:
    low = mcp._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        async with low.lifespan(low) as state:
            await _serve_modern_stream(low, read_stream, write_stream, lifespan_state=state, raise_exceptions=False)


if __name__ == "__main__":
    anyio.run(main)
