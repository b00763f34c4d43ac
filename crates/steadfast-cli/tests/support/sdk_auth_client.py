#!/usr/bin/env python3
"""The Python MCP SDK's streamable-HTTP client with its own OAuth client
(`ClientCredentialsOAuthProvider`) through `steadfast proxy --listen` with `[auth]`.

argv: URL ISSUER CLIENT_SECRET. The SDK finds everything else itself: the gateway's 401 names
its Protected Resource Metadata, which names the authorization server, whose metadata gives the
token endpoint; the token is requested with the resource indicator and the advertised scopes.
A call the token lacks a scope for gets a 403 `insufficient_scope` challenge, and the SDK steps up
(a new token with that scope) and retries. Prints one JSON line:
{"tools": [...], "echo": text, "scope_before": s, "charge": text, "charge_error": bool,
 "scope_after": s}. Every wait is bounded (30 s).
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamablehttp_client


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.info

    async def set_client_info(self, info):
        self.info = info


async def main(url, issuer, secret):
    storage = Memory()
    auth = ClientCredentialsOAuthProvider(
        server_url=url, storage=storage, client_id="gateway", client_secret=secret, issuer=issuer
    )
    with anyio.fail_after(30):
        async with streamablehttp_client(url, auth=auth) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                tools = sorted(t.name for t in (await s.list_tools()).tools)
                echo = await s.call_tool("echo", {"text": "through the gateway"})
                before = storage.tokens.scope
                charge = await s.call_tool("charge", {"amount": 1})
                after = storage.tokens.scope
    print(json.dumps({
        "tools": tools,
        "echo": echo.content[0].text,
        "scope_before": before,
        "charge": charge.content[0].text if charge.content else "",
        "charge_error": bool(charge.isError),
        "scope_after": after,
    }))


anyio.run(main, *sys.argv[1:4])
