// The TypeScript MCP SDK client, driven by crates/steadfast-cli/tests/ts_sdk.rs.
//
// Usage: node client.mjs '<plan as JSON>'
//   plan = { mode: "legacy" | "auto" | "modern",
//            stdio?: { command, args }, http?: { url, token? },
//            call?: { name, arguments } }
// Prints one JSON line: { era, version, server, tools: [names], call: CallToolResult | null }
// or { error } with exit code 1. "modern" is the SDK's modern-only client (no fallback to
// initialize): it speaks 2026-07-28 or fails.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const plan = JSON.parse(process.argv[2]);

function options(mode) {
  if (mode === "legacy") return { versionNegotiation: { mode: "legacy" } };
  if (mode === "auto") return { versionNegotiation: { mode: "auto" } };
  if (mode === "modern") return { versionNegotiation: { mode: { pin: "2026-07-28" } } };
  throw new Error(`unknown mode ${mode}`);
}

function transport() {
  if (plan.stdio) {
    return new StdioClientTransport({ ...plan.stdio, stderr: "inherit" });
  }
  const headers = plan.http.token ? { Authorization: `Bearer ${plan.http.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(plan.http.url), { requestInit: { headers } });
}

const client = new Client({ name: "steadfast-ts-sdk-test", version: "1.0.0" }, options(plan.mode));
// Every step is bounded: a hang is a failure, not a stuck test.
const timer = setTimeout(() => {
  console.log(JSON.stringify({ error: "timed out after 30 s" }));
  process.exit(1);
}, 30_000);
try {
  await client.connect(transport());
  const tools = await client.listTools();
  const call = plan.call ? await client.callTool(plan.call) : null;
  console.log(
    JSON.stringify({
      era: client.getProtocolEra(),
      version: client.getNegotiatedProtocolVersion(),
      server: client.getServerVersion()?.name ?? null,
      tools: tools.tools.map((t) => t.name),
      call,
    }),
  );
  await client.close();
  clearTimeout(timer);
  process.exit(0);
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.message ?? e), code: e?.code ?? null }));
  process.exit(1);
}
