#!/usr/bin/env python3
"""Memory per idle HTTP session: the gateway's resident memory with 0, 100 and 1000 sessions.

    scripts/session-memory.py                      # release build, LEVELS 0,100,1000
    scripts/session-memory.py --bin target/debug/steadfast --levels 0,10,100 --streams

Starts `steadfast proxy --listen 127.0.0.1:0` over the test suite's fake upstream (stdio),
opens one session and ends it (so the upstream is connected and the process warm, with no
session left), then initializes sessions (`initialize` + `notifications/initialized`, one
keep-alive connection) up to each level and reads VmRSS from /proc after each. With
`--streams` each session also holds its event stream (GET /mcp) open, as a client that
listens for server messages does. Prints a markdown table; RSS is the gateway's alone (the
upstream is a separate process). Every wait is bounded (`--deadline`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "crates/steadfast-cli/tests/support/fake_upstream.py")
TOKEN = "session-memory"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def settled_rss(pid: int, deadline: float) -> int:
    """RSS once it stops moving (three equal reads 100 ms apart), or at the deadline."""
    last, same = -1, 0
    while time.monotonic() < deadline:
        now = rss_kib(pid)
        same = same + 1 if now == last else 0
        if same >= 2:
            return now
        last = now
        time.sleep(0.1)
    return last


class Gateway:
    def __init__(self, binary: str, deadline: float):
        env = dict(os.environ, SESSION_MEMORY_TOKEN=TOKEN, RUST_LOG="warn")
        self.proc = subprocess.Popen(
            [binary, "proxy", "--listen", "127.0.0.1:0", "--token-env", "SESSION_MEMORY_TOKEN",
             "--session-idle", "1h", "--", sys.executable, FAKE],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        self.url = None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode(errors="replace")
            if not line:
                break
            if line.startswith("steadfast: serving MCP at "):
                self.url = line.split(" at ", 1)[1].strip()
                break
        if self.url is None:
            self.proc.kill()
            raise RuntimeError("the gateway never said where it listens")
        rest = self.url.removeprefix("http://")
        self.authority, self.path = rest.split("/", 1)
        self.path = "/" + self.path
        host, port = self.authority.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def post(self, body: dict, session: str | None = None):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {TOKEN}"}
        if session:
            headers["Mcp-Session-Id"] = session
        self.conn.request("POST", self.path, json.dumps(body), headers)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, r.getheader("mcp-session-id"), data

    def open_session(self) -> str:
        status, sid, data = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "session-memory", "version": "1"}}})
        if status != 200 or not sid:
            raise RuntimeError(f"initialize: HTTP {status}: {data[:200]!r}")
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        if status != 202:
            raise RuntimeError(f"initialized: HTTP {status}")
        return sid

    def end_session(self, sid: str) -> None:
        self.conn.request("DELETE", self.path, headers={
            "Authorization": f"Bearer {TOKEN}", "Mcp-Session-Id": sid})
        self.conn.getresponse().read()

    def open_stream(self, sid: str) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=30)
        s.sendall((f"GET {self.path} HTTP/1.1\r\nHost: {self.authority}\r\n"
                   f"Accept: text/event-stream\r\nAuthorization: Bearer {TOKEN}\r\n"
                   f"Mcp-Session-Id: {sid}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("the event stream closed")
            head += chunk
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"GET /mcp: {head[:100]!r}")
        return s

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "target/release/steadfast"))
    p.add_argument("--levels", default="0,100,1000", help="session counts, increasing (≤ 1024)")
    p.add_argument("--streams", action="store_true", help="each session holds GET /mcp open")
    p.add_argument("--deadline", type=float, default=300, help="seconds for the whole run")
    args = p.parse_args()
    deadline = time.monotonic() + args.deadline
    levels = [int(x) for x in args.levels.split(",")]
    gw = Gateway(args.bin, deadline)
    streams = []
    try:
        # Warm: the upstream is started by the first initialize; then no session is left.
        gw.end_session(gw.open_session())
        rows = []
        opened = 0
        for level in levels:
            while opened < level:
                if time.monotonic() > deadline:
                    raise RuntimeError("deadline passed")
                sid = gw.open_session()
                if args.streams:
                    streams.append(gw.open_stream(sid))
                opened += 1
            rows.append((level, settled_rss(gw.proc.pid, min(deadline, time.monotonic() + 10))))
        base = rows[0][1]
        kind = "with an open event stream" if args.streams else "idle"
        print(f"| sessions ({kind}) | gateway RSS, KiB | over {rows[0][0]} sessions, KiB | per session, KiB |")
        print("|---|---|---|---|")
        for level, rss in rows:
            extra = rss - base
            per = f"{extra / (level - rows[0][0]):.1f}" if level > rows[0][0] else "—"
            print(f"| {level} | {rss} | {extra} | {per} |")
    finally:
        for s in streams:
            s.close()
        gw.close()


if __name__ == "__main__":
    main()
