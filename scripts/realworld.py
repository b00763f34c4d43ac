#!/usr/bin/env python3
"""The proxy against MCP servers nobody on this project wrote: every list and the handshake
DIRECT vs THROUGH `steadfast proxy`, compared as JSON, plus a few calls both ways.

Run by scripts/realworld.sh (which installs the servers into target/realworld first). Talks raw
newline-delimited JSON-RPC (and raw streamable HTTP), so it sees exactly what is on the wire —
an SDK client would drop fields it does not know and hide a difference. The Python MCP SDK's
own client is then run through the proxy as a smoke check (a real client must work through it).

Every wait is bounded. Exit status: 0 when everything matched, 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RW = os.environ.get("REALWORLD_DIR", os.path.join(ROOT, "target", "realworld"))
BIN = os.environ.get("STEADFAST_BIN", os.path.join(ROOT, "target", "debug", "steadfast"))
HEALTH = os.environ.get("STEADFAST_HEALTH_TOOL", "steadfast_health")
TIMEOUT = float(os.environ.get("REALWORLD_TIMEOUT", "30"))
CLIENT_INFO = {"name": "steadfast-realworld", "version": "1"}
PROTOCOL = "2025-11-25"


class Failure(Exception):
    pass


# -- raw clients --------------------------------------------------------------------------------


class RawStdio:
    """A child spoken to in raw JSON lines; server-to-client requests get -32601."""

    def __init__(self, argv, env=None, cwd=None):
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd)
        self.lines = queue.Queue()
        self.stderr = []
        self.next_id = 1
        self.notifications = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _drain_err(self):
        for line in self.proc.stderr:
            if len(self.stderr) < 200:
                self.stderr.append(line.decode(errors="replace").rstrip())

    def send(self, msg):
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise Failure(f"write failed: {e}") from e

    def request(self, method, params=None, timeout=TIMEOUT):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"{method}: no answer within {timeout:.0f}s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                tail = " | ".join(self.stderr[-3:])
                raise Failure(f"{method}: the process closed stdout ({tail})")
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if "method" in m and "id" in m:
                self.send({"jsonrpc": "2.0", "id": m["id"],
                           "error": {"code": -32601, "message": "not supported by this client"}})
            elif "method" in m:
                self.notifications.append(m)
            elif m.get("id") == rid:
                return m

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class RawHttp:
    """Streamable HTTP by hand: POST one message, read JSON or SSE, keep the session id."""

    def __init__(self, url):
        self.url = url
        self.session = None
        self.next_id = 1
        self.notifications = []

    def _post(self, msg, timeout):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        req = urllib.request.Request(self.url, data=json.dumps(msg).encode(), headers=headers,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                sid = r.headers.get("Mcp-Session-Id")
                if sid:
                    self.session = sid
                body = r.read().decode()
                ctype = r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raise Failure(f"HTTP {e.code}: {e.read().decode(errors='replace')[:200]}") from e
        except (OSError, urllib.error.URLError) as e:
            raise Failure(f"HTTP: {e}") from e
        if not body.strip():
            return []
        if "text/event-stream" in ctype:
            return [json.loads(line[5:].strip()) for line in body.splitlines()
                    if line.startswith("data:") and line[5:].strip()]
        return [json.loads(body)]

    def request(self, method, params=None, timeout=TIMEOUT):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        for m in self._post(msg, timeout):
            if m.get("id") == rid and "method" not in m:
                return m
            self.notifications.append(m)
        raise Failure(f"{method}: no response in the HTTP answer")

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._post(msg, TIMEOUT)

    def close(self):
        pass


# -- what is compared ---------------------------------------------------------------------------


LISTS = [("tools/list", "tools"), ("prompts/list", "prompts"), ("resources/list", "resources"),
         ("resources/templates/list", "resourceTemplates")]


def snapshot(client, calls):
    """initialize, every list (all pages), then the calls; each entry a JSON value or an
    {"error": …} so a failure is compared like anything else."""
    out = {}
    init = client.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                         "clientInfo": CLIENT_INFO})
    client.notify("notifications/initialized")
    if "error" in init:
        raise Failure(f"initialize: {init['error']}")
    res = init["result"]
    out["initialize.protocolVersion"] = res.get("protocolVersion")
    out["initialize.capabilities"] = res.get("capabilities")
    out["initialize.serverInfo"] = res.get("serverInfo")
    out["initialize.instructions"] = res.get("instructions")
    caps = res.get("capabilities") or {}
    for method, key in LISTS:
        family = method.split("/")[0]
        if family not in caps:
            out[method] = {"skipped": f"no {family} capability"}
            continue
        items, cursor, pages = [], None, 0
        while pages < 50:
            r = client.request(method, {"cursor": cursor} if cursor else {})
            pages += 1
            if "error" in r:
                items = {"error": r["error"]}
                break
            items.extend(r["result"].get(key, []))
            cursor = r["result"].get("nextCursor")
            if not cursor:
                break
        out[method] = items
    tools = {t["name"] for t in out.get("tools/list", []) if isinstance(t, dict)}
    for label, run in calls:
        try:
            out[f"call {label}"] = run(client, tools)
        except Failure as e:
            out[f"call {label}"] = {"failure": str(e)}
    return out


def tool_call(name, arguments, normalize=None, label=None):
    def run(client, tools):
        if name not in tools:
            return {"skipped": f"{name} not listed"}
        r = client.request("tools/call", {"name": name, "arguments": arguments})
        v = r.get("result", {"error": r.get("error")})
        return normalize(v) if normalize else v
    return (f"{name} ({label})" if label else name, run)


def rpc(method, params, label):
    """Any request, its whole answer (result or JSON-RPC error) compared."""
    def run(client, _tools):
        r = client.request(method, params)
        return {k: v for k, v in r.items() if k in ("result", "error")}
    return (f"{method} ({label})", run)


def task_call(name, arguments):
    """A task-augmented tools/call (MCP 2025-11-25), then tasks/get, tasks/result, tasks/list."""
    def run(client, tools):
        if name not in tools:
            return {"skipped": f"{name} not listed"}
        r = client.request("tools/call", {"name": name, "arguments": arguments,
                                          "task": {"ttl": 60000}})
        if "error" in r:
            return {"create": {"error": r["error"]}}
        task = r["result"].get("task")
        if not task:
            return {"create": "not a task", "result": r["result"]}
        out = {"create": {"status": task.get("status"), "keys": sorted(task)}}
        tid = task["taskId"]
        got = client.request("tasks/get", {"taskId": tid})
        out["tasks/get"] = sorted(got.get("result", {})) if "result" in got else got.get("error")
        done = client.request("tasks/result", {"taskId": tid}, timeout=60)
        res = done.get("result", {"error": done.get("error")})
        out["tasks/result"] = {k: v for k, v in res.items() if k != "_meta"}
        listed = client.request("tasks/list", {})
        out["tasks/list contains it"] = (
            any(t.get("taskId") == tid for t in listed["result"].get("tasks", []))
            if "result" in listed else listed.get("error"))
        return out
    return (f"{name} (as a task)", run)


def digits_blurred(v):
    return json.loads(re.sub(r"\d", "0", json.dumps(v)))


def without_health(snap):
    tools = snap.get("tools/list")
    if isinstance(tools, list):
        snap["tools/list"] = [t for t in tools if t.get("name") != HEALTH]
    return snap


def diff(a, b, path="", out=None, limit=10_000):
    """Paths where two JSON values differ, each with both sides (abridged)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k}: only through the proxy ({short(b[k])})")
            elif k not in b:
                out.append(f"{path}.{k}: missing through the proxy (direct: {short(a[k])})")
            else:
                diff(a[k], b[k], f"{path}.{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items direct, {len(b)} through the proxy")
        for i, (x, y) in enumerate(zip(a, b)):
            label = x.get("name") or x.get("uri") or x.get("uriTemplate") or i \
                if isinstance(x, dict) else i
            diff(x, y, f"{path}[{label}]", out, limit)
    elif a != b:
        out.append(f"{path}: direct {short(a)}, through the proxy {short(b)}")
    return out


def short(v, n=110):
    s = json.dumps(v)
    return s if len(s) <= n else s[:n] + "…"


# -- the servers --------------------------------------------------------------------------------


def node_bin(name):
    return os.path.join(RW, "node_modules", ".bin", name)


def venv_bin(name):
    return os.path.join(RW, "venv", "bin", name)


def servers(tmp):
    files = os.path.join(tmp, "files")
    os.makedirs(files, exist_ok=True)
    note = os.path.join(files, "note.txt")
    return [
        {
            "name": "server-filesystem",
            "argv": [node_bin("mcp-server-filesystem"), files],
            "calls": [
                tool_call("write_file", {"path": note, "content": "hello from steadfast\n"}),
                tool_call("read_text_file", {"path": note}),
                tool_call("list_directory", {"path": files}),
                tool_call("read_text_file", {"path": os.path.join(files, "missing.txt")},
                          label="missing file"),
                tool_call("read_text_file", {"path": "/etc/hostname"}, label="outside the root"),
            ],
        },
        {
            "name": "server-memory",
            "argv": [node_bin("mcp-server-memory")],
            # each side gets its own memory file so both start empty
            "env_per_side": lambda side: {"MEMORY_FILE_PATH": os.path.join(tmp, f"memory-{side}.jsonl")},
            "calls": [
                tool_call("create_entities", {"entities": [
                    {"name": "steadfast", "entityType": "project", "observations": ["resilient"]}]}),
                tool_call("read_graph", {}),
                tool_call("search_nodes", {"query": "steadfast"}),
            ],
        },
        {
            "name": "server-everything",
            "argv": [node_bin("mcp-server-everything"), "stdio"],
            "calls": [
                tool_call("echo", {"message": "hello"}),
                tool_call("get-sum", {"a": 2, "b": 3}),
                tool_call("get-tiny-image", {}),
                tool_call("get-structured-content", {"location": "New York"}),
                tool_call("get-sum", {"a": 2}, label="invalid arguments"),
                rpc("tools/call", {"name": "no-such-tool", "arguments": {}}, "unknown tool"),
                rpc("tasks/list", {}, "before any task"),
                rpc("tasks/get", {"taskId": "no-such-task"}, "unknown task"),
                rpc("prompts/get", {"name": "simple-prompt"}, "simple-prompt"),
                rpc("resources/read", {"uri": "demo://resource/static/document/architecture.md"},
                    "a static resource"),
                rpc("completion/complete", {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
                                            "argument": {"name": "department", "value": "E"}},
                    "prompt argument"),
                rpc("logging/setLevel", {"level": "error"}, "error"),
                rpc("no/such/method", {}, "unknown method"),
                rpc("ping", {}, "ping"),
                task_call("simulate-research-query", {"topic": "retries"}),
            ],
        },
        {
            "name": "mcp-server-time",
            "argv": [venv_bin("mcp-server-time"), "--local-timezone", "UTC"],
            "calls": [
                tool_call("get_current_time", {"timezone": "Europe/Paris"}, digits_blurred),
                tool_call("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                           "target_timezone": "Asia/Tokyo"}),
                tool_call("convert_time", {"source_timezone": "Nowhere/Land", "time": "12:00",
                                           "target_timezone": "UTC"}, label="bad zone"),
            ],
        },
        {
            "name": "mcp-server-fetch",
            "argv": [venv_bin("mcp-server-fetch")],
            "optional": True,
            # a closed local port: the same failure both ways, no network needed
            "calls": [tool_call("fetch", {"url": "http://127.0.0.1:9/", "max_length": 100})],
        },
    ]


def run_side(server, side, tmp):
    env = dict(os.environ)
    if "env_per_side" in server:
        env.update(server["env_per_side"](side))
    argv = server["argv"] if side == "direct" else [BIN, "proxy", "--", *server["argv"]]
    client = RawStdio(argv, env=env, cwd=tmp)
    try:
        return snapshot(client, server["calls"])
    finally:
        client.close()


MARKER = re.compile(r"\[[a-z][a-z -]*\]")


def sanitized_equal(a, b):
    """Whether `b` is `a` with some spans replaced by the sanitizer's markers ([redacted],
    [internal-url], …): the proxy sanitizes error text on purpose (README, "isError results")."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(sanitized_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(sanitized_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str) and a != b:
        parts = MARKER.split(b)
        if len(parts) == 1:
            return False
        pattern = ".+?".join(re.escape(p) for p in parts)
        return re.fullmatch(pattern, a, re.S) is not None
    return a == b


def compare(name, direct, proxied, rows):
    ok = True
    for key in direct:
        a, b = direct[key], proxied.get(key)
        if a == b:
            rows.append((name, key, "same", ""))
            continue
        if sanitized_equal(a, b):
            rows.append((name, key, "sanitized", "error text with secrets/internal addresses redacted, as designed"))
            continue
        ok = False
        found = diff(a, b)
        shown = "; ".join(found[:6]) + (f"; … (+{len(found) - 6} more)" if len(found) > 6 else "")
        rows.append((name, key, "DIFF", shown or f"{short(a)} vs {short(b)}"))
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def everything_over_http(tmp, rows):
    """server-everything over streamable HTTP: direct (raw HTTP) vs the proxy with an HTTP
    upstream (`[upstream] url = …`)."""
    port = free_port()
    env = dict(os.environ, PORT=str(port))
    server = subprocess.Popen([node_bin("mcp-server-everything"), "streamableHttp"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port, 20):
            rows.append(("everything (HTTP)", "start", "FAIL", "no listener within 20s"))
            return False
        url = f"http://127.0.0.1:{port}/mcp"
        calls = [tool_call("echo", {"message": "hello"}), tool_call("get-sum", {"a": 2, "b": 3}),
                 task_call("simulate-research-query", {"topic": "retries"})]
        direct = snapshot(RawHttp(url), calls)
        cfg = os.path.join(tmp, "http-upstream.toml")
        with open(cfg, "w", encoding="utf-8") as f:
            f.write(f'[upstream]\nurl = "{url}"\n')
        client = RawStdio([BIN, "proxy", "--config", cfg])
        try:
            proxied = snapshot(client, calls)
        finally:
            client.close()
        return compare("everything (HTTP)", direct, without_health(proxied), rows)
    except Failure as e:
        rows.append(("everything (HTTP)", "run", "FAIL", str(e)))
        return False
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()


def sdk_smoke(server, tmp):
    """The Python MCP SDK's own client through the proxy: initialize, list tools, one call."""
    try:
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError as e:
        return "SKIP", f"mcp SDK not importable ({e})"
    env = server["env_per_side"]("sdk") if "env_per_side" in server else None

    async def go():
        params = StdioServerParameters(command=BIN, args=["proxy", "--", *server["argv"]],
                                       env=env, cwd=tmp)
        with anyio.fail_after(TIMEOUT):
            async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    return len(tools.tools)

    try:
        n = anyio.run(go)
        return "ok", f"initialize + tools/list ({n} tools) with mcp SDK"
    except Exception as e:  # the SDK raises many kinds; report them all the same way
        return "FAIL", f"{type(e).__name__}: {str(e)[:150]}"


def sdk_over_http_front(server, tmp):
    """The Python SDK's streamable-HTTP client through `steadfast proxy --listen` (the HTTP
    front) in front of the server: initialize, list tools, one ping."""
    try:
        import anyio
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
    except ImportError as e:
        return "SKIP", f"mcp SDK not importable ({e})"
    env = dict(os.environ)
    if "env_per_side" in server:
        env.update(server["env_per_side"]("sdk-http"))
    proc = subprocess.Popen([BIN, "proxy", "--listen", "127.0.0.1:0", "--", *server["argv"]],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    try:
        url = None
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and url is None:
            line = proc.stderr.readline()
            if not line:
                break
            if line.startswith("steadfast: serving MCP at "):
                url = line.split(" at ", 1)[1].strip()
        if url is None:
            return "FAIL", "the HTTP front did not say where it listens"
        threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()

        async def go():
            with anyio.fail_after(TIMEOUT):
                async with streamable_http_client(url) as streams:
                    read, write = streams[0], streams[1]
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        tools = await session.list_tools()
                        await session.send_ping()
                        return len(tools.tools)

        n = anyio.run(go)
        return "ok", f"initialize + tools/list ({n} tools) + ping over the HTTP front"
    except Exception as e:  # the SDK raises many kinds; report them all the same way
        return "FAIL", f"{type(e).__name__}: {str(e)[:150]}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def gateway_multi(tmp, rows):
    """Several real servers behind one `steadfast proxy` (TOML `[upstreams.NAME]`), driven by the
    Python SDK's client: every server's tools listed under NAME_tool, and a call, a prompt and a
    resource each routed to the server that owns it."""
    try:
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError as e:
        rows.append(("gateway", "several upstreams", "SKIP", f"mcp SDK not importable ({e})"))
        return True
    members = {s["name"]: s for s in servers(tmp)}
    chosen = {"everything": members["server-everything"], "memory": members["server-memory"],
              "time": members["mcp-server-time"]}
    if any(not os.path.exists(s["argv"][0]) for s in chosen.values()):
        rows.append(("gateway", "several upstreams", "FAIL", "a server is not installed"))
        return False
    config = os.path.join(tmp, "gateway.toml")
    with open(config, "w", encoding="utf-8") as f:
        f.write('[proxy]\nlist_timeout = "20s"\n')
        for name, s in chosen.items():
            f.write(f"\n[upstreams.{name}]\ncommand = {json.dumps(s['argv'][0])}\n"
                    f"args = {json.dumps(s['argv'][1:])}\n")
            if "env_per_side" in s:
                f.write(f"env = {{ MEMORY_FILE_PATH = {json.dumps(os.path.join(tmp, 'memory-gw.jsonl'))} }}\n")
    # What each server lists directly, to compare names with.
    direct = {}
    for name, s in chosen.items():
        env = dict(os.environ)
        if "env_per_side" in s:
            env.update(s["env_per_side"]("gateway-direct"))
        client = RawStdio(s["argv"], env=env, cwd=tmp)
        try:
            client.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                          "clientInfo": CLIENT_INFO})
            client.notify("notifications/initialized")
            r = client.request("tools/list", {})
            direct[name] = {t["name"] for t in r["result"]["tools"]}
        finally:
            client.close()
    expected = {f"{n}_{t}" for n, tools in direct.items() for t in tools}

    async def go():
        params = StdioServerParameters(command=BIN, args=["proxy", "--config", config], cwd=tmp)
        with anyio.fail_after(TIMEOUT * 2):
            async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {t.name for t in (await session.list_tools()).tools}
                    echo = await session.call_tool("everything_echo", {"message": "via gateway"})
                    zone = await session.call_tool("time_get_current_time", {"timezone": "UTC"})
                    graph = await session.call_tool("memory_read_graph", {})
                    prompts = {p.name for p in (await session.list_prompts()).prompts}
                    prompt = await session.get_prompt("everything_simple-prompt")
                    resource = await session.read_resource(
                        "demo://resource/static/document/architecture.md")
                    return tools, echo, zone, graph, prompts, prompt, resource

    try:
        tools, echo, zone, graph, prompts, prompt, resource = anyio.run(go)
    except Exception as e:  # the SDK raises many kinds; report them all the same way
        rows.append(("gateway", "several upstreams (python SDK)", "FAIL",
                     f"{type(e).__name__}: {str(e)[:150]}"))
        return False
    problems = []
    if tools != expected:
        problems.append(f"tools differ: missing {sorted(expected - tools)[:5]}, "
                        f"extra {sorted(tools - expected)[:5]}")
    def failed(r):
        return getattr(r, "is_error", None) or getattr(r, "isError", None)

    if failed(echo) or "via gateway" not in json.dumps(echo.model_dump()):
        problems.append(f"everything_echo: {short(echo.model_dump())}")
    for label, r in (("time_get_current_time", zone), ("memory_read_graph", graph)):
        if failed(r):
            problems.append(f"{label}: {short(r.model_dump())}")
    if "everything_simple-prompt" not in prompts or not prompt.messages:
        problems.append(f"prompts: {sorted(prompts)[:5]}")
    if not resource.contents:
        problems.append("the resource read came back empty")
    ok = not problems
    rows.append(("gateway", "several upstreams (python SDK)", "ok" if ok else "DIFF",
                 "; ".join(problems) if problems else
                 f"{len(tools)} tools from 3 servers, namespaced; a call each, a prompt, a resource"))
    return ok


def main():
    p = argparse.ArgumentParser(description="Direct vs through-the-proxy comparison.")
    p.add_argument("--only", action="append", help="run only these servers (by name)")
    p.add_argument("--no-http", action="store_true", help="skip server-everything over HTTP")
    p.add_argument("--json", help="also write every row to this JSON file")
    args = p.parse_args()
    if not os.access(BIN, os.X_OK):
        sys.exit(f"realworld: no steadfast binary at {BIN} (set STEADFAST_BIN or cargo build -p steadfast-cli)")
    tmp = tempfile.mkdtemp(prefix="steadfast-realworld-")
    rows, ok = [], True
    try:
        for server in servers(tmp):
            name = server["name"]
            if args.only and name not in args.only:
                continue
            if not os.path.exists(server["argv"][0]):
                rows.append((name, "install", "SKIP" if server.get("optional") else "FAIL",
                             f"{server['argv'][0]} missing"))
                ok = ok and server.get("optional", False)
                continue
            try:
                direct = run_side(server, "direct", tmp)
            except Failure as e:
                rows.append((name, "direct", "FAIL", str(e)))
                ok = False
                continue
            try:
                proxied = without_health(run_side(server, "proxy", tmp))
            except Failure as e:
                rows.append((name, "through the proxy", "FAIL", str(e)))
                ok = False
                continue
            ok = compare(name, direct, proxied, rows) and ok
            status, detail = sdk_smoke(server, tmp)
            rows.append((name, "python SDK client via proxy", status, detail))
            ok = ok and status != "FAIL"
            status, detail = sdk_over_http_front(server, tmp)
            rows.append((name, "python SDK client via the HTTP front", status, detail))
            ok = ok and status != "FAIL"
        if not args.only or "gateway" in args.only:
            ok = gateway_multi(tmp, rows) and ok
        if not args.no_http and (not args.only or "everything-http" in args.only):
            ok = everything_over_http(tmp, rows) and ok
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    width = max(len(r[1]) for r in rows) if rows else 10
    print(f"| {'server':<20} | {'check':<{width}} | result | difference |")
    print(f"|{'-' * 22}|{'-' * (width + 2)}|--------|------------|")
    for server, check, status, detail in rows:
        print(f"| {server:<20} | {check:<{width}} | {status:<6} | {detail} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([dict(zip(("server", "check", "result", "detail"), r)) for r in rows], f,
                      indent=1)
    diffs = sum(1 for r in rows if r[2] in ("DIFF", "FAIL"))
    print(f"\n{diffs} difference(s)" if diffs else "\nno differences")
    sys.exit(0 if ok and not diffs else 1)


if __name__ == "__main__":
    main()
