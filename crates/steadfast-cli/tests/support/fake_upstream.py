#!/usr/bin/env python3
"""A scriptable fake MCP server for fault injection (Python 3.11 standard library only).

It speaks raw newline-delimited JSON-RPC on stdio, or a small part of streamable HTTP with
``--http PORT`` (POST /mcp, ``Mcp-Session-Id``, JSON or SSE answers), and misbehaves on request.
Tests start it as the proxy's upstream (or talk to it directly) and assert what the other side
saw; ``--count-file`` records what *it* saw, so a test can tell "retried twice" from "ran twice".

Modes (``--mode NAME``, repeatable, combine where it makes sense):

  normal                    tools echo, slow (progress), flaky, lookup (read-only),
                            charge (non-idempotent), hang, big, ask (a request to the
                            client: sampling, roots, elicitation); ping; logging/setLevel
  never-answers-initialize  reads everything, answers nothing
  garbage-then-sleep        prints non-JSON lines at start, then answers nothing
  exit-after-initialize     (stdio) answers initialize, then exits (after --exit-delay-ms)
  oversized-reply           every tools/call result carries --reply-mib MiB of text
  announce-on-initialized   sends notifications/tools/list_changed when the client says
                            notifications/initialized (as server-everything does)
  progress-burst            tools/call: --burst progress notifications and the result in one write
  log-flood                 tools/call: --flood notifications/message, then the result
  ignores-eof               stdin EOF and SIGTERM are ignored (only SIGKILL ends it)
  tasks                     capability `tasks`, tool `research` with taskSupport "required",
                            tasks/get, tasks/result, tasks/list, tasks/cancel (MCP 2025-11-25)
  session-loss              (HTTP) sessions are forgotten after --session-loss-after requests
                            (or on SIGUSR1, like a restart); old ids get --session-loss-status
                            400 (TypeScript SDK shape) or 404 (Python SDK shape)
  accept-and-never-answer   (HTTP) reads each request and never answers it
  modern-only               MCP 2026-07-28 only: server/discover answered, initialize and
                            requests without the per-request _meta envelope refused
                            (-32022 / -32602); envelopes seen counted as "envelopes"; over
                            HTTP without sessions (no Mcp-Session-Id)
  announce-changes          watches --lists-file: when its content changes, announces
                            tools/prompts/resources list_changed and resources/updated for each
                            URI in its "updated" list. Handshake era (stdio): list changes to
                            the client, updates for URIs it subscribed (resources/subscribe,
                            capability resources.subscribe). modern-only: only on open
                            subscriptions/listen streams, as each one's filter asks, stamped
                            with its subscription id (ack first); counted as "listens" and
                            "listens_closed", the URIs asked under "listen_uris"
  hang-exchanges            (HTTP) answers initialize and tools/list; every other POST (calls,
                            notifications) is read and never answered until the client
                            closes the connection, counted as "abandoned"; a GET stream is
                            accepted and never written to, its end counted as "streams_closed"

Lists from a file (``--lists-file PATH``, read again on every list, so a test can change what is
listed): ``{"resources": [uri, ...], "prompts": [name, ...]}`` adds the resources and prompts
capabilities, ``resources/list`` (``--page-size`` items a page, each with ``--list-padding`` bytes
of description), ``resources/templates/list`` (empty), ``resources/read`` and ``prompts/get``
(which refuse what the file does not list now). ``--only-version V`` answers ``initialize`` with
protocol revision V whatever was asked; ``--without-capability NAME`` (repeatable) leaves a
capability out of the ``initialize`` result.

The counter file is JSON: {"starts": n, "methods": {method: n}, "tools": {tool: n},
"cancelled": n, "answers": n, "stale_answers": n}; "answers" counts the answers to the fake's
own requests (``ask``), "stale_answers" those to a request it had cancelled; it is rewritten (atomically) after every message and carries on across
restarts of the process, so a test can count restarts too.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = {
    "normal",
    "never-answers-initialize",
    "garbage-then-sleep",
    "exit-after-initialize",
    "oversized-reply",
    "announce-on-initialized",
    "progress-burst",
    "log-flood",
    "ignores-eof",
    "tasks",
    "session-loss",
    "accept-and-never-answer",
    "hang-exchanges",
    "modern-only",
    "announce-changes",
}

MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"

KNOWN_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

OBJECT = {"type": "object"}


def tool(name, description, properties=None, required=None, annotations=None, execution=None):
    schema = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    t = {"name": name, "description": description, "inputSchema": schema}
    if annotations is not None:
        t["annotations"] = annotations
    if execution is not None:
        t["execution"] = execution
    return t


TOOLS = [
    tool("echo", "Returns its `text` argument.", {"text": {"type": "string"}}, ["text"],
         {"readOnlyHint": True}),
    tool("slow", "Sleeps `seconds`, reporting `steps` progress notifications on the way.",
         {"seconds": {"type": "number"}, "steps": {"type": "integer"}}, None,
         {"readOnlyHint": True}),
    tool("flaky", "Fails with a transient error the first --flaky-failures calls, then succeeds.",
         {}, None, {"readOnlyHint": False, "idempotentHint": True}),
    tool("lookup", "Reads a record (read-only).", {"key": {"type": "string"}}, None,
         {"readOnlyHint": True, "idempotentHint": True}),
    tool("charge", "Charges a card (not idempotent; must never run twice).",
         {"amount": {"type": "number"}}, None,
         {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}),
    tool("hang", "Never answers (until cancelled).", {}, None, {"readOnlyHint": True}),
    tool("big", "Returns `mib` MiB of text.", {"mib": {"type": "number"}}, None,
         {"readOnlyHint": True}),
    tool("ask", "Sends the client a request (`method`, default roots/list, with `params`) and "
         "returns its answer as JSON text. `after_calls`: first wait until that many tools/call "
         "requests have arrived; `cancel_after_ms`: cancel the request if unanswered by then; "
         "`wait_s`: give up after that long (default 30).",
         {"method": {"type": "string"}, "params": {"type": "object"},
          "after_calls": {"type": "integer"}, "cancel_after_ms": {"type": "integer"},
          "wait_s": {"type": "number"}}, None,
         {"readOnlyHint": False, "idempotentHint": False}),
]

TASK_TOOL = tool(
    "research",
    "A long job that must run as a task; its result is ready after --task-seconds. With "
    "`ask_after_calls`, it asks the client (elicitation tagged with the task) once that many "
    "tools/call requests have arrived, and its result is the answer.",
    {"topic": {"type": "string"}, "ask_after_calls": {"type": "integer"}},
    None,
    {"readOnlyHint": True},
    {"taskSupport": "required"},
)


def now_iso():
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Counter:
    """Counts what the fake saw; survives restarts through the file, and adds up what several
    processes sharing the file saw (a gateway may run one upstream process per client
    capability set): each count is a read-modify-write of the file under a lock on
    ``<file>.lock``, so one process's write never undoes another's."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.data = {"starts": 0, "methods": {}, "tools": {}, "cancelled": 0}
        self.bump("starts")

    def _reload(self):
        if self.path and os.path.exists(self.path):
            try:
                with open(self.path, encoding="utf-8") as f:
                    data = {"starts": 0, "methods": {}, "tools": {}, "cancelled": 0}
                    data.update(json.load(f))
                    self.data = data
            except (OSError, ValueError):
                pass

    def bump(self, key, name=None):
        with self.lock:
            lock = open(f"{self.path}.lock", "a") if self.path else None
            try:
                if lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                self._reload()
                if name is None:
                    self.data[key] = self.data.get(key, 0) + 1
                else:
                    table = self.data.setdefault(key, {})
                    table[name] = table.get(name, 0) + 1
                self._save()
            finally:
                if lock:
                    lock.close()

    def _save(self):
        if not self.path:
            return
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)


class Task:
    def __init__(self, task_id, ttl, seconds, topic):
        self.id = task_id
        self.ttl = ttl
        self.created = now_iso()
        self.updated = self.created
        self.status = "working"
        self.result = None
        self.done = threading.Event()
        self.topic = topic
        self.seconds = seconds

    def view(self):
        t = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttl": self.ttl,
            "pollInterval": 100,
        }
        if self.status == "working":
            t["statusMessage"] = f"researching {self.topic}"
        return t

    def finish(self, status, result=None):
        if self.done.is_set():
            return
        self.status = status
        self.result = result
        self.updated = now_iso()
        self.done.set()


class Fake:
    """The server logic, independent of the transport: `handle` returns the lines to write."""

    def __init__(self, args):
        self.args = args
        self.modes = set(args.mode or ["normal"])
        self.counter = Counter(args.count_file)
        self.flaky_left = args.flaky_failures
        self.cancelled = {}
        self.cancel_lock = threading.Lock()
        self.tasks = {}
        self.tasks_lock = threading.Lock()
        # Requests the fake sent the client: id (JSON text) -> [event, answer]; and the ids it
        # cancelled, so a late answer is counted as stale.
        self.asked = {}
        self.asked_cancelled = set()
        self.asked_lock = threading.Lock()
        self.next_ask = 0
        self.calls_seen = 0
        self.calls_cond = threading.Condition()
        # announce-changes: the client's subscriptions (handshake era), the open listens
        # (modern: id JSON -> (filter, emit)), and where unsolicited messages go (stdio).
        self.subscribed = set()
        self.listens = {}
        self.listens_lock = threading.Lock()
        self.broadcast = None
        if "announce-changes" in self.modes and args.lists_file:
            threading.Thread(target=self.watch_lists, daemon=True).start()

    # -- capabilities -------------------------------------------------------------------------

    def tools(self):
        tools = list(TOOLS)
        if "tasks" in self.modes:
            tools.append(TASK_TOOL)
        return tools

    def capabilities(self):
        caps = {"tools": {"listChanged": True}, "logging": {}}
        if "tasks" in self.modes:
            caps["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        if self.args.lists_file:
            caps["resources"] = {"listChanged": True}
            caps["prompts"] = {"listChanged": True}
            if "announce-changes" in self.modes:
                caps["resources"]["subscribe"] = True
        for name in self.args.without_capability or []:
            caps.pop(name, None)
        return caps

    def lists(self):
        try:
            with open(self.args.lists_file, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def list_page(self, rid, params, emit):
        uris = self.lists().get("resources", [])
        start = int(params.get("cursor") or 0)
        size = self.args.page_size or len(uris) or 1
        pad = "d" * self.args.list_padding
        page = [{"uri": u, "name": u, "description": pad} for u in uris[start:start + size]]
        result = {"resources": page}
        if start + size < len(uris):
            result["nextCursor"] = str(start + size)
        emit([ok(rid, result)])

    def lists_request(self, rid, method, params, emit):
        """resources/* and prompts/* from --lists-file; True when `method` is one of them."""
        if not self.args.lists_file:
            return False
        if method == "resources/list":
            self.list_page(rid, params, emit)
        elif method == "resources/templates/list":
            emit([ok(rid, {"resourceTemplates": []})])
        elif method == "resources/read":
            uri = params.get("uri")
            if uri in self.lists().get("resources", []):
                emit([ok(rid, {"contents": [{"uri": uri, "text": f"content of {uri}"}]})])
            else:
                emit([error(rid, -32002, f"Resource not found: {uri}")])
        elif method == "prompts/list":
            names = self.lists().get("prompts", [])
            emit([ok(rid, {"prompts": [{"name": n} for n in names]})])
        elif method == "prompts/get":
            name = params.get("name")
            if name in self.lists().get("prompts", []):
                emit([ok(rid, {"messages": [{"role": "user",
                                             "content": {"type": "text", "text": name}}]})])
            else:
                emit([error(rid, -32602, f"Unknown prompt: {name}")])
        else:
            return False
        return True

    # -- dispatch -----------------------------------------------------------------------------

    def cancel_event(self, rid):
        with self.cancel_lock:
            return self.cancelled.setdefault(json.dumps(rid), threading.Event())

    def handle(self, msg, emit):
        """Handles one message. `emit(list_of_messages)` writes them in one write; it may be
        called several times (progress) and from another thread. Returns True when the
        message was answered (or needs no answer) and False when the fake stays silent."""
        method = msg.get("method")
        rid = msg.get("id")
        if method is None:
            if rid is not None:
                self.on_answer(msg)
            return True
        self.counter.bump("methods", method)
        if rid is None:
            if method == "notifications/cancelled":
                self.counter.bump("cancelled")
                target = (msg.get("params") or {}).get("requestId")
                self.cancel_event(target).set()
                self.end_listen(target)
            if method == "notifications/initialized" and "announce-on-initialized" in self.modes:
                # Servers that register tools once the session is up (server-everything).
                emit([{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}])
            return True
        params = msg.get("params") or {}
        if "modern-only" in self.modes and self.modern_refuses(rid, method, params, emit):
            return True
        if method == "initialize":
            if "never-answers-initialize" in self.modes or "garbage-then-sleep" in self.modes:
                return False
            asked = params.get("protocolVersion")
            version = asked if asked in KNOWN_VERSIONS else KNOWN_VERSIONS[0]
            if self.args.only_version:
                version = self.args.only_version
            emit([ok(rid, {
                "protocolVersion": version,
                "capabilities": self.capabilities(),
                "serverInfo": {"name": "fake-upstream", "version": "1.0.0"},
                "instructions": "A fake MCP server for Steadfast's fault-injection tests.",
            })])
            if "exit-after-initialize" in self.modes and self.args.http is None:
                time.sleep(self.args.exit_delay_ms / 1000)
                os._exit(0)
            return True
        if "never-answers-initialize" in self.modes or "garbage-then-sleep" in self.modes:
            return False
        if method == "subscriptions/listen" and "announce-changes" in self.modes:
            self.open_listen(rid, params, emit)
        elif method in ("resources/subscribe", "resources/unsubscribe") \
                and "announce-changes" in self.modes:
            uri = params.get("uri")
            if method == "resources/subscribe":
                self.subscribed.add(uri)
            else:
                self.subscribed.discard(uri)
            emit([ok(rid, {})])
        elif method == "ping":
            emit([ok(rid, {})])
        elif method == "tools/list":
            emit([ok(rid, {"tools": self.tools()})])
        elif method == "logging/setLevel":
            emit([ok(rid, {})])
        elif method == "tools/call":
            with self.calls_cond:
                self.calls_seen += 1
                self.calls_cond.notify_all()
            threading.Thread(target=self.call_tool, args=(rid, params, emit), daemon=True).start()
        elif self.lists_request(rid, method, params, emit):
            pass
        elif method in ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel") \
                and "tasks" in self.modes:
            threading.Thread(target=self.task_request, args=(rid, method, params, emit),
                             daemon=True).start()
        else:
            emit([error(rid, -32601, f"Method not found: {method}")])
        return True

    def modern_refuses(self, rid, method, params, emit):
        """modern-only: MCP 2026-07-28 and nothing else. `initialize` gets -32022, a request
        without the per-request envelope -32602, `server/discover` its result; True when the
        request was answered here. Envelopes seen are counted under "envelopes"."""
        meta = params.get("_meta") or {}
        version = meta.get(VERSION_KEY)
        if method == "initialize" or (version is not None and version != MODERN):
            data = {"supported": [MODERN], "requested": version or params.get("protocolVersion")}
            emit([{"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32022, "message": "Unsupported protocol version", "data": data}}])
            return True
        if version is None or CAPS_KEY not in meta:
            emit([error(rid, -32602, "params._meta lacks the 2026-07-28 envelope")])
            return True
        self.counter.bump("envelopes", version)
        if method == "server/discover":
            emit([ok(rid, {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": self.capabilities(),
                "_meta": {"io.modelcontextprotocol/serverInfo":
                          {"name": "fake-modern-upstream", "version": "1.0.0"}},
                "instructions": "A modern-only fake.",
            })])
            return True
        return False

    # -- announce-changes -----------------------------------------------------------------------

    def watch_lists(self):
        last = None
        while True:
            try:
                with open(self.args.lists_file, "rb") as f:
                    now = f.read()
            except OSError:
                now = None
            if last is not None and now != last:
                self.announce()
            last = now
            time.sleep(0.05)

    def announce(self):
        lists = self.lists()
        changes = [("toolsListChanged", "notifications/tools/list_changed", None),
                   ("promptsListChanged", "notifications/prompts/list_changed", None),
                   ("resourcesListChanged", "notifications/resources/list_changed", None)]
        changes += [("resourceSubscriptions", "notifications/resources/updated", uri)
                    for uri in lists.get("updated", [])]
        self.counter.bump("announced")
        if "modern-only" not in self.modes:
            out = []
            for _, method, uri in changes:
                if uri is None:
                    out.append({"jsonrpc": "2.0", "method": method})
                elif uri in self.subscribed:
                    out.append({"jsonrpc": "2.0", "method": method, "params": {"uri": uri}})
            if self.broadcast is not None and out:
                self.broadcast(out)
            return
        with self.listens_lock:
            listens = list(self.listens.items())
        for key, (wanted, emit) in listens:
            sid = json.loads(key)
            out = []
            for field, method, uri in changes:
                if uri is None and wanted.get(field) is True:
                    out.append({"jsonrpc": "2.0", "method": method,
                                "params": {"_meta": {SUBSCRIPTION_KEY: sid}}})
                elif uri is not None and uri in (wanted.get(field) or []):
                    out.append({"jsonrpc": "2.0", "method": method,
                                "params": {"_meta": {SUBSCRIPTION_KEY: sid}, "uri": uri}})
            if out:
                try:
                    emit(out)
                except OSError:
                    self.end_listen(sid)

    def open_listen(self, rid, params, emit):
        wanted = params.get("notifications") or {}
        self.counter.bump("listens")
        for uri in wanted.get("resourceSubscriptions") or []:
            self.counter.bump("listen_uris", uri)
        with self.listens_lock:
            self.listens[json.dumps(rid)] = (wanted, emit)
        emit([{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": {SUBSCRIPTION_KEY: rid}, "notifications": wanted}}])

    def end_listen(self, rid):
        with self.listens_lock:
            gone = self.listens.pop(json.dumps(rid), None)
        if gone is not None:
            self.counter.bump("listens_closed")

    # -- tools --------------------------------------------------------------------------------

    def call_tool(self, rid, params, emit):
        name = params.get("name")
        arguments = params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken")
        self.counter.bump("tools", name)
        known = {t["name"] for t in self.tools()}
        if name not in known:
            emit([error(rid, -32602, f"Unknown tool: {name}")])
            return
        if name == "research":
            self.start_task(rid, params, emit)
            return
        if "task" in params:
            emit([error(rid, -32601, f"tool {name} does not support task-augmented calls")])
            return
        before = []
        if "log-flood" in self.modes:
            self.flood(emit)
        if "progress-burst" in self.modes and token is not None:
            k = self.args.burst
            before = [progress(token, i + 1, k, f"step {i + 1}") for i in range(k)]
        if "oversized-reply" in self.modes:
            emit(before + [ok(rid, text_result("x" * int(self.args.reply_mib * 1024 * 1024)))])
            return
        if name == "ask" and "modern-only" in self.modes:
            emit([ok(rid, self.ask_modern(params, arguments))])
            return
        result = self.run_tool(rid, name, arguments, token, emit)
        if result is None:
            return  # cancelled: no answer, as the spec says
        if "modern-only" in self.modes:
            # As the Python SDK 2.x's servers mark a call's result (mcp-server-time does).
            result = dict(result, resultType="complete", _meta={
                "io.modelcontextprotocol/serverInfo":
                    {"name": "fake-modern-upstream", "version": "1.0.0"}})
        emit(before + [ok(rid, result)])

    def run_tool(self, rid, name, arguments, token, emit):
        cancelled = self.cancel_event(rid)
        if name == "echo":
            result = text_result(str(arguments.get("text", "")))
            if arguments.get("is_error"):  # a tool error (not transient: no retry helps)
                result["isError"] = True
            return result
        if name == "lookup":
            return text_result(f"record {arguments.get('key', '')}")
        if name == "charge":
            return text_result(f"charged {arguments.get('amount', 0)}")
        if name == "big":
            mib = float(arguments.get("mib", self.args.reply_mib))
            return text_result("x" * int(mib * 1024 * 1024))
        if name == "flaky":
            with self.cancel_lock:
                if self.args.flaky_across_restarts:
                    # The counter file carries on across restarts (this call is counted).
                    failing = self.counter.data["tools"].get("flaky", 0) <= self.args.flaky_failures
                else:
                    failing = self.flaky_left > 0
                    if failing:
                        self.flaky_left -= 1
            if failing:
                r = text_result("503 Service Unavailable: temporarily unavailable, try again")
                r["isError"] = True
                return r
            return text_result("flaky succeeded")
        if name == "slow":
            # `write` (a path): the call's side effect, a file written once the sleep is over
            # (not when cancelled first); with `write_first`, written before the sleep.
            seconds = float(arguments.get("seconds", 1))
            steps = max(1, int(arguments.get("steps", 4)))
            effect = arguments.get("write")
            if effect and arguments.get("write_first"):
                with open(effect, "w") as f:
                    f.write("done")
            for i in range(steps):
                if cancelled.wait(seconds / steps):
                    return None
                if token is not None:
                    emit([progress(token, i + 1, steps, f"step {i + 1} of {steps}")])
            if effect and not arguments.get("write_first"):
                with open(effect, "w") as f:
                    f.write("done")
            return text_result(f"slept {seconds}s")
        if name == "hang":
            cancelled.wait()
            return None
        if name == "ask":
            return self.ask(arguments, emit, token)
        return text_result("?")

    # -- requests to the client ---------------------------------------------------------------

    def ask(self, arguments, emit, token=None):
        """Sends the client `method` (default roots/list) with `params`, after `after_calls`
        calls were seen; once answered, `progress_after` progress notifications (with the
        call's token, if it asked for progress), then the answer as the tool's text."""
        after = int(arguments.get("after_calls", 0))
        with self.calls_cond:
            self.calls_cond.wait_for(lambda: self.calls_seen >= after, timeout=10)
        with self.asked_lock:
            self.next_ask += 1
            rid = f"srv-{self.next_ask}"
            slot = [threading.Event(), None]
            self.asked[json.dumps(rid)] = slot
        method = str(arguments.get("method", "roots/list"))
        emit([{"jsonrpc": "2.0", "id": rid, "method": method,
               "params": arguments.get("params") or {}}])
        cancel_ms = arguments.get("cancel_after_ms")
        wait = float(arguments.get("wait_s", 30))
        if cancel_ms is not None:
            wait = min(wait, int(cancel_ms) / 1000)
        answered = slot[0].wait(wait)
        with self.asked_lock:
            self.asked.pop(json.dumps(rid), None)
            if not answered and cancel_ms is not None:
                self.asked_cancelled.add(json.dumps(rid))
        if not answered:
            if cancel_ms is not None:
                emit([{"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": rid, "reason": "the fake gave up"}}])
                return text_result(json.dumps({"cancelled": rid}))
            return text_result(json.dumps({"unanswered": rid}))
        answer = slot[1]
        steps = int(arguments.get("progress_after", 0))
        if token is not None:
            for i in range(steps):
                emit([progress(token, i + 1, steps, f"after the answer {i + 1}")])
        return text_result(json.dumps({k: answer[k] for k in ("result", "error") if k in answer}))

    def ask_modern(self, params, arguments):
        """modern-only `ask`: MCP 2026-07-28 has no requests to the client, so the request
        (`method`, `params`) is embedded in an `input_required` result under key `q`, with
        `requestState` `fake-state-N`; `rounds` (default 1) rounds of it, then the last
        round's `inputResponses` and `requestState` as the tool's text."""
        state = params.get("requestState") or "fake-state-0"
        done = int(str(state).rsplit("-", 1)[-1])
        if params.get("inputResponses") is not None:
            self.counter.bump("input_rounds")
        if done >= int(arguments.get("rounds", 1)):
            seen = {"inputResponses": params.get("inputResponses"), "requestState": state}
            return dict(text_result(json.dumps(seen)), resultType="complete")
        request = {"method": str(arguments.get("method", "roots/list"))}
        if arguments.get("params") is not None:
            request["params"] = arguments["params"]
        return {"resultType": "input_required", "inputRequests": {"q": request},
                "requestState": f"fake-state-{done + 1}"}

    def on_answer(self, msg):
        key = json.dumps(msg.get("id"))
        with self.asked_lock:
            slot = self.asked.get(key)
            stale = key in self.asked_cancelled
        self.counter.bump("answers")
        if slot is not None:
            slot[1] = msg
            slot[0].set()
        elif stale:
            self.counter.bump("stale_answers")

    def flood(self, emit):
        n = self.args.flood
        pad = "y" * self.args.flood_bytes
        chunk = []
        for i in range(n):
            chunk.append({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "logger": "fake",
                                     "data": f"log line {i} {pad}"}})
            if len(chunk) == 1000:
                emit(chunk)
                chunk = []
        if chunk:
            emit(chunk)

    # -- tasks (MCP 2025-11-25) ---------------------------------------------------------------

    def start_task(self, rid, params, emit):
        spec = params.get("task")
        if not isinstance(spec, dict):
            emit([error(rid, -32601,
                        "tool research requires task augmentation (execution.taskSupport is "
                        "\"required\"): call it with params.task")])
            return
        ttl = spec.get("ttl", 60000)
        topic = str((params.get("arguments") or {}).get("topic", "anything"))
        task = Task(uuid.uuid4().hex, ttl, self.args.task_seconds, topic)
        with self.tasks_lock:
            self.tasks[task.id] = task

        ask_after = (params.get("arguments") or {}).get("ask_after_calls")

        def work():
            if ask_after is not None:
                # Input needed while the task runs: an elicitation tagged with the task, sent
                # once that many tools/call requests have arrived (its answer is the result).
                related = {"io.modelcontextprotocol/related-task": {"taskId": task.id}}
                answer = self.ask({"method": "elicitation/create", "after_calls": ask_after,
                                   "wait_s": 10,
                                   "params": {"message": f"go on researching {topic}?",
                                              "requestedSchema": {"type": "object",
                                                                  "properties": {}},
                                              "_meta": related}}, emit)
                task.finish("completed", answer)
            elif not task.done.wait(task.seconds):
                task.finish("completed", text_result(f"findings on {topic}"))
            # Status changes may be announced; requestors must not rely on it.
            emit([{"jsonrpc": "2.0", "method": "notifications/tasks/status",
                   "params": task.view()}])

        threading.Thread(target=work, daemon=True).start()
        emit([ok(rid, {"task": task.view()})])

    def task_request(self, rid, method, params, emit):
        if method == "tasks/list":
            with self.tasks_lock:
                views = [t.view() for t in self.tasks.values()]
            emit([ok(rid, {"tasks": views})])
            return
        task_id = params.get("taskId")
        with self.tasks_lock:
            task = self.tasks.get(task_id)
        if task is None:
            emit([error(rid, -32602, f"unknown task: {task_id}")])
            return
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.id}}
        if method == "tasks/get":
            emit([ok(rid, task.view())])
        elif method == "tasks/cancel":
            if task.done.is_set():
                emit([error(rid, -32602, f"task {task_id} is already {task.status}")])
                return
            task.finish("cancelled")
            emit([ok(rid, task.view())])
        else:  # tasks/result blocks until the task is terminal
            task.done.wait()
            if task.status == "completed":
                result = dict(task.result)
                result["_meta"] = related
                emit([ok(rid, result)])
            else:
                emit([{"jsonrpc": "2.0", "id": rid,
                       "error": {"code": -32603, "message": f"task {task.status}",
                                 "data": related}}])


def ok(rid, result):
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def error(rid, code, message):
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def progress(token, value, total, message):
    return {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": value, "total": total,
                       "message": message}}


def text_result(text):
    return {"content": [{"type": "text", "text": text}], "isError": False}


def encode(messages):
    return b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages)


def sleep_forever():
    while True:
        time.sleep(3600)


def record_trace(args, msg, header):
    """--trace-file: one JSON line per request with the trace context it carried (in
    params._meta, and for HTTP in the traceparent header)."""
    if not args.trace_file or "method" not in msg or "id" not in msg:
        return
    meta = (msg.get("params") or {}).get("_meta") or {}
    line = {"method": msg["method"], "meta": meta.get("traceparent"),
            "tracestate": meta.get("tracestate"), "header": header}
    with open(args.trace_file, "a") as f:
        f.write(json.dumps(line) + "\n")


# -- stdio --------------------------------------------------------------------------------------


def serve_stdio(fake):
    out = sys.stdout.buffer
    lock = threading.Lock()

    def emit(messages):
        data = encode(messages)
        with lock:
            try:
                out.write(data)
                out.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)

    fake.broadcast = emit
    if "garbage-then-sleep" in fake.modes:
        with lock:
            out.write(b"this is not JSON\n{\"jsonrpc\": \"2.0\", broken\n\x00\xff\xfe\n")
            out.flush()
    for line in sys.stdin.buffer:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            record_trace(fake.args, msg, None)
            fake.handle(msg, emit)
    # stdin closed
    if "ignores-eof" in fake.modes:
        sleep_forever()
    os._exit(0)


# -- streamable HTTP ----------------------------------------------------------------------------


class HttpState:
    def __init__(self, fake):
        self.fake = fake
        self.sessions = set()
        self.requests = 0
        self.lock = threading.Lock()

    def forget_sessions(self):
        with self.lock:
            self.sessions.clear()
        # Tests wait for this before their next request: the signal is handled asynchronously.
        self.fake.counter.bump("forgotten")


def make_handler(state):
    fake = state.fake
    args = fake.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet: tests read stderr only on failure
            if args.verbose:
                super().log_message(fmt, *a)

        def reply(self, status, body=None, headers=None, ctype="application/json"):
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if body is not None:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def session_gone(self, sid):
            if args.session_loss_status == 404:
                # Python SDK shape
                self.reply(404, {"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32600, "message": "Session not found"}})
            else:
                # TypeScript SDK example servers: 400 and a JSON-RPC error naming the session
                self.reply(400, {"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32000,
                                           "message": "Bad Request: No valid session ID provided"}})

        def wait_for_disconnect(self):
            """Blocks until the client closes the connection (its end of the exchange)."""
            sock = self.connection
            while True:
                readable, _, _ = select.select([sock], [], [], 0.05)
                if readable:
                    try:
                        if not sock.recv(1, socket.MSG_PEEK):
                            return
                    except OSError:
                        return
                    time.sleep(0.05)  # bytes, not EOF: a pipelining client; keep waiting

        def do_GET(self):
            if "hang-exchanges" in fake.modes:
                fake.counter.bump("streams")
                self.wait_for_disconnect()
                fake.counter.bump("streams_closed")
                return
            self.reply(405, None, {"Allow": "POST, DELETE"})

        def do_DELETE(self):
            sid = self.headers.get("Mcp-Session-Id")
            with state.lock:
                known = sid in state.sessions
                state.sessions.discard(sid)
            self.reply(200 if known else 404)

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if "accept-and-never-answer" in fake.modes:
                sleep_forever()
            try:
                msg = json.loads(raw)
            except ValueError:
                self.reply(400, {"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32700, "message": "Parse error"}})
                return
            if not isinstance(msg, dict):
                self.reply(400, {"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32600, "message": "batches not supported"}})
                return
            record_trace(args, msg, self.headers.get("traceparent"))
            sid = self.headers.get("Mcp-Session-Id")
            # What reached the server as Authorization (a gateway must never pass its client's on).
            fake.counter.bump("authorization", self.headers.get("Authorization") or "(none)")
            headers = {}
            with state.lock:
                state.requests += 1
                if ("session-loss" in fake.modes and args.session_loss_after
                        and state.requests > args.session_loss_after
                        and msg.get("method") != "initialize"):
                    # the "restart": every session made so far is forgotten, once
                    state.sessions.clear()
                    args.session_loss_after = 0
                modern = "modern-only" in fake.modes
                if msg.get("method") == "initialize" and not modern:
                    sid = uuid.uuid4().hex
                    state.sessions.add(sid)
                    headers["Mcp-Session-Id"] = sid
                elif sid not in state.sessions:
                    sid = None
            if sid is None and not modern:
                fake.counter.bump("methods", "(session rejected)")
                self.session_gone(self.headers.get("Mcp-Session-Id"))
                return
            if sid is not None:
                headers.setdefault("Mcp-Session-Id", sid)
            if "hang-exchanges" in fake.modes and msg.get("method") not in (
                    "initialize", "notifications/initialized", "tools/list"):
                fake.counter.bump("methods", msg.get("method") or "(answer)")
                self.wait_for_disconnect()
                fake.counter.bump("abandoned")
                return
            if "id" not in msg or "method" not in msg:
                fake.handle(msg, lambda _m: None)
                self.reply(202, None, headers)
                return
            sse = "text/event-stream" in (self.headers.get("Accept") or "")
            self.answer(msg, headers, sse)

        def answer(self, msg, headers, sse):
            """Collects what the fake emits until the response; streams notifications as SSE
            events when the client accepts them (dropping them otherwise, as JSON mode must)."""
            done = threading.Event()
            lock = threading.Lock()
            started = []

            def start_stream():
                self.send_response(200)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                started.append(True)
                self.close_connection = True

            final = []

            def emit(messages):
                with lock:
                    if done.is_set():
                        return
                    # Notifications and the fake's own requests ride the answer stream of
                    # the request they belong to, ahead of its response.
                    resp = [m for m in messages
                            if "method" not in m and m.get("id") == msg["id"]]
                    notes = [m for m in messages if not any(m is r for r in resp)]
                    if sse and notes:
                        if not started:
                            start_stream()
                        for m in notes:
                            self.wfile.write(b"event: message\ndata: " +
                                             json.dumps(m).encode() + b"\n\n")
                    if resp:
                        if sse and started:
                            self.wfile.write(b"event: message\ndata: " +
                                             json.dumps(resp[0]).encode() + b"\n\n")
                            self.wfile.flush()
                        else:
                            final.append(resp[0])
                        done.set()
                    elif sse and started:
                        self.wfile.flush()

            if not fake.handle(msg, emit):
                sleep_forever()
            done.wait()
            if final:
                self.reply(200, final[0], headers)

    return Handler


def serve_http(fake):
    state = HttpState(fake)
    server = ThreadingHTTPServer(("127.0.0.1", fake.args.http), make_handler(state))
    server.daemon_threads = True
    signal.signal(signal.SIGUSR1, lambda *_: state.forget_sessions())
    port = server.server_address[1]
    # The first stdout line tells a test where to connect.
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if "ignores-eof" in fake.modes:
        sleep_forever()
    # A pipe on stdin ends the server when it closes, so a test that drops its handle ends the
    # server too; anything else (a terminal, /dev/null) serves until killed.
    try:
        piped = stat.S_ISFIFO(os.fstat(0).st_mode)
    except OSError:
        piped = False
    if not piped:
        sleep_forever()
    try:
        sys.stdin.buffer.read()
    except (OSError, ValueError):
        pass
    os._exit(0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", action="append", choices=sorted(MODES),
                   help="a fault to inject (repeatable); default: normal")
    p.add_argument("--http", type=int, metavar="PORT",
                   help="serve streamable HTTP on 127.0.0.1:PORT (0: any) instead of stdio")
    p.add_argument("--count-file", help="JSON file counting starts, methods and tool calls")
    p.add_argument("--trace-file", help="append each request's traceparent (_meta, header) here")
    p.add_argument("--pid-file", help="write the process id here at start")
    p.add_argument("--reply-mib", type=float, default=17.0, help="oversized-reply size (MiB)")
    p.add_argument("--burst", type=int, default=20, help="progress-burst: notifications per call")
    p.add_argument("--flood", type=int, default=200_000, help="log-flood: messages per call")
    p.add_argument("--flood-bytes", type=int, default=100, help="log-flood: padding per message")
    p.add_argument("--flaky-failures", type=int, default=2, help="flaky: failures before success")
    p.add_argument("--flaky-across-restarts", action="store_true",
                   help="flaky: count failures in --count-file, so a restart does not reset them")
    p.add_argument("--exit-delay-ms", type=int, default=0, help="exit-after-initialize: delay")
    p.add_argument("--task-seconds", type=float, default=0.5, help="tasks: time until completed")
    p.add_argument("--session-loss-after", type=int, default=0,
                   help="session-loss: forget sessions after N requests (0: only on SIGUSR1)")
    p.add_argument("--session-loss-status", type=int, choices=[400, 404], default=400,
                   help="session-loss: 400 (TypeScript SDK shape) or 404 (Python SDK shape)")
    p.add_argument("--lists-file", help="resources and prompts listed from this JSON file")
    p.add_argument("--page-size", type=int, default=0, help="resources/list: items a page")
    p.add_argument("--list-padding", type=int, default=0,
                   help="resources/list: description bytes per item")
    p.add_argument("--only-version", help="answer initialize with this protocol revision")
    p.add_argument("--without-capability", action="append",
                   help="leave this capability out of the initialize result (repeatable)")
    p.add_argument("--verbose", action="store_true", help="HTTP request log on stderr")
    p.add_argument("--start-delay-ms", type=int, default=0,
                   help="read nothing for this long at start (a server slow to import)")
    args = p.parse_args(argv)
    if args.pid_file:
        with open(args.pid_file, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    fake = Fake(args)
    if "ignores-eof" in fake.modes:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(args.start_delay_ms / 1000)
    if args.http is not None:
        serve_http(fake)
    else:
        serve_stdio(fake)


if __name__ == "__main__":
    main()
