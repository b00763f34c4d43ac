#!/usr/bin/env python3
"""The Python MCP SDK's own streamable-HTTP server, as users run it: FastMCP (mcp 1.x) or
MCPServer (mcp 2.x), with an `echo(text)` tool.

  sdk_http_server.py stateful    the SDK's default: sessions (`Mcp-Session-Id`), SSE answers
  sdk_http_server.py stateless   `stateless_http=True`

Prints `listening on http://127.0.0.1:PORT/mcp` once its socket is bound, then serves until
killed.
"""

import socket
import sys

import uvicorn

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer

    def make_app(stateless: bool):
        mcp = MCPServer("sdk-http-python")
        register(mcp)
        return mcp.streamable_http_app(stateless_http=stateless)

except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP

    def make_app(stateless: bool):
        mcp = FastMCP("sdk-http-python", stateless_http=stateless)
        register(mcp)
        return mcp.streamable_http_app()


def register(mcp) -> None:
    @mcp.tool()
    async def echo(text: str) -> str:
        """Answers with the text it was given."""
        return text


def main() -> None:
    stateless = sys.argv[1:] == ["stateless"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = make_app(stateless)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
