#!/usr/bin/env python3
"""An MCP server over streamable HTTP built with the Python SDK 2.x, whose tool mirrors an
argument into a header (MCP 2026-07-28 `x-mcp-header`): `region(region, text)` marks
`region` with `x-mcp-header: Region`, so the SDK's HTTP server refuses a modern `tools/call`
of it (-32020) unless the request carries `Mcp-Param-Region` equal to the argument. Prints
`listening on http://127.0.0.1:PORT/mcp` once its socket is bound, then serves until killed.
"""

import socket
from typing import Annotated

import uvicorn
from pydantic import Field
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("param-header-python")


@mcp.tool()
async def region(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    text: str,
) -> str:
    """Answers with the region it was routed for and the text."""
    return f"{region}: {text}"


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = mcp.streamable_http_app(stateless_http=True, json_response=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
