#!/usr/bin/env python3
"""A stdio MCP server for the error-class checks (`tests/eras_sdk.rs`), built with whichever
Python MCP SDK runs it: 2.x (`MCPServer`, dual-era) or 1.x (`FastMCP`, handshake era). Tools:
`echo` (its text) and `strict`, which refuses its argument by raising the SDK's protocol error
with -32602 (invalid params): the 2.x server answers that with a JSON-RPC error, the 1.x server
with an `isError` result. An unknown tool is an `isError` result in both.
"""

try:
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.shared.exceptions import MCPError

    def refuse(message):
        raise MCPError(code=-32602, message=message)
except ImportError:  # the 1.x SDK
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.shared.exceptions import McpError
    from mcp.types import ErrorData

    def refuse(message):
        raise McpError(ErrorData(code=-32602, message=message))

mcp = Server("error-class")


@mcp.tool()
async def echo(text: str) -> str:
    """Returns its text."""
    return text


@mcp.tool()
async def strict(text: str) -> str:
    """Refuses every argument as invalid params."""
    refuse(f"invalid params: text {text!r} is not acceptable")
    return text


if __name__ == "__main__":
    mcp.run()
