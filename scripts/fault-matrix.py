#!/usr/bin/env python3
"""Each fault of the fake upstream (crates/steadfast-cli/tests/support/fake_upstream.py) run
through `steadfast proxy`, and what the proxy did: a survey for humans, not a test (the tests
assert; this reports). Every scenario is bounded (seconds); the whole run takes about two
minutes. Python 3.10+ standard library only.

    STEADFAST_BIN=target/debug/steadfast scripts/fault-matrix.py [--only NAME]...
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realworld import BIN, ROOT, Failure, RawStdio  # noqa: E402

FAKE = os.path.join(ROOT, "crates", "steadfast-cli", "tests", "support", "fake_upstream.py")
INIT = {"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "fault-matrix", "version": "1"}}


def fake(*args):
    return [sys.executable, FAKE, *args]


def proxy(*fake_args, config=None):
    argv = [BIN, "proxy"]
    if config:
        argv += ["--config", config]
    return argv if config else argv + ["--", *fake(*fake_args)]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            return "zombie" not in f.read()
    except OSError:
        return False


def timed(client, method, params, within):
    start = time.monotonic()
    try:
        r = client.request(method, params, timeout=within)
        return time.monotonic() - start, r
    except Failure as e:
        return time.monotonic() - start, {"failure": str(e)}


def describe(r, n=160):
    s = json.dumps(r)
    return s if len(s) <= n else s[:n] + "…"


def exits_on_eof(client, within=5):
    client.proc.stdin.close()
    try:
        client.proc.wait(timeout=within)
        return f"exits {client.proc.returncode} on stdin EOF"
    except subprocess.TimeoutExpired:
        client.proc.kill()
        client.proc.wait()
        return f"still running {within}s after stdin EOF (killed)"


# -- scenarios ---------------------------------------------------------------------------------


def handshake(mode):
    def run(tmp):
        c = RawStdio(proxy("--mode", mode))
        took, r = timed(c, "initialize", INIT, 40)
        answered = "failure" not in r
        head = (f"initialize answered after {took:.1f}s: {describe(r)}" if answered
                else f"initialize unanswered after {took:.0f}s")
        return answered and took <= 30, f"{head}; {exits_on_eof(c)}"
    return run


def exit_after_initialize(tmp):
    counts = os.path.join(tmp, "restarts.json")
    c = RawStdio(proxy("--mode", "exit-after-initialize", "--count-file", counts))
    took, r = timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    start_cpu = cpu_seconds(c.proc.pid) or 0
    time.sleep(10)
    starts = json.load(open(counts)).get("starts", 0) if os.path.exists(counts) else 0
    cpu = (cpu_seconds(c.proc.pid) or 0) - start_cpu
    changed = sum(1 for n in c.notifications if n.get("method") == "notifications/tools/list_changed")
    took2, r2 = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, 20)
    ok = starts <= 12 and changed <= starts and "result" in r2
    return ok, (f"initialize {'answered' if 'result' in r else describe(r)} in {took:.1f}s; in 10 s: "
                f"{starts} upstream starts, {changed} tools/list_changed, proxy CPU {cpu:.1f}s; "
                f"a call then: {took2:.1f}s → {describe(r2, 120)}; {exits_on_eof(c)}")


def oversized_reply(tmp):
    c = RawStdio(proxy("--mode", "oversized-reply", "--reply-mib", "17"))
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    took, r = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, 30)
    answered = "failure" not in r
    size = len(json.dumps(r)) if answered else 0
    detail = (f"17 MiB reply: answered in {took:.1f}s ({size} bytes: {describe(r, 120)})"
              if answered else f"17 MiB reply: unanswered after {took:.0f}s")
    took2, r2 = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "y" * (17 << 20)}}, 30)
    detail += (f"; 17 MiB request: {'answered in %.1fs: %s' % (took2, describe(r2, 120))}"
               if "failure" not in r2 else f"; 17 MiB request: unanswered after {took2:.0f}s")
    return answered and took < 10 and "failure" not in r2, detail + "; " + exits_on_eof(c)


def progress_burst(tmp):
    c = RawStdio(proxy("--mode", "progress-burst", "--burst", "20"))
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    before, runs = 0, 30
    for i in range(runs):
        took, r = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "x"},
                                          "_meta": {"progressToken": f"t{i}"}}, 20)
        before += sum(1 for n in c.notifications if n.get("method") == "notifications/progress"
                      and n["params"].get("progressToken") == f"t{i}")
    timed(c, "ping", {}, 10)  # whatever was still coming arrives before this answer
    total = sum(1 for n in c.notifications if n.get("method") == "notifications/progress")
    lost = 20 * runs - total
    return before == 20 * runs, (f"{20 * runs - before} of {20 * runs} progress notifications missing "
                                 f"before their result ({runs} calls, 20 each): {lost} never arrived, "
                                 f"{total - before} arrived after the result; {exits_on_eof(c)}")


def log_flood(tmp):
    """The client does not read for a while; the proxy's memory is sampled meanwhile."""
    p = subprocess.Popen(proxy("--mode", "log-flood", "--flood", "200000"),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    send = lambda m: (p.stdin.write(json.dumps(m).encode() + b"\n"), p.stdin.flush())
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    base = rss_kib(p.pid)
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "echo", "arguments": {"text": "x"}}})
    peak = base
    for _ in range(20):  # 10 s of not reading
        time.sleep(0.5)
        peak = max(peak, rss_kib(p.pid) or 0)
    # now read it all (bounded)
    got_logs, answered = 0, False
    done = threading.Event()

    def drain():
        nonlocal got_logs, answered
        for line in p.stdout:
            m = json.loads(line)
            if m.get("method") == "notifications/message":
                got_logs += 1
            if m.get("id") == 1:
                answered = True
                break
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    done.wait(60)
    time.sleep(1)
    after = rss_kib(p.pid)
    p.kill()
    p.wait()
    ok = peak - base < 100_000 and answered
    return ok, (f"RSS {base} KiB → peak {peak} KiB while the client did not read for 10 s → "
                f"{after} KiB after draining; {got_logs} of 200000 logs relayed; "
                f"result {'delivered' if answered else 'not delivered within 60 s'}")


def unknown_tools(tmp):
    c = RawStdio(proxy())  # normal fake
    c.argv = c.argv
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    timed(c, "tools/call", {"name": "echo", "arguments": {"text": "warm"}}, 20)
    base = rss_kib(c.proc.pid)
    for i in range(5000):
        c.request("tools/call", {"name": f"no_such_tool_{i}", "arguments": {}}, timeout=20)
    time.sleep(0.5)
    after = rss_kib(c.proc.pid)
    per = (after - base) * 1024 / 5000
    return per < 512, f"5000 distinct unknown tool names: RSS {base} → {after} KiB (~{per:.0f} B each); {exits_on_eof(c)}"


def hung_calls(tmp):
    c = RawStdio(proxy())
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    base = rss_kib(c.proc.pid)
    n = 3000
    for i in range(n):
        c.send({"jsonrpc": "2.0", "id": 10_000 + i, "method": "tools/call",
                "params": {"name": "hang", "arguments": {}}})
    time.sleep(5)
    loaded = rss_kib(c.proc.pid)
    errors = 0
    for i in range(n):
        c.notify("notifications/cancelled", {"requestId": 10_000 + i, "reason": "test"})
    time.sleep(5)
    after = rss_kib(c.proc.pid)
    took, r = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "still here"}}, 20)
    errors = sum(1 for n_ in c.notifications if "error" in n_)
    per = (loaded - base) * 1024 / n
    return after - base < 20_000, (f"{n} hung calls in flight: RSS {base} → {loaded} KiB (~{per / 1024:.1f} KiB each), "
                                   f"{after} KiB after cancelling them all; no in-flight cap error seen; "
                                   f"next call {took:.1f}s → {describe(r, 80)}")


def lifecycle_sigterm(tmp):
    pidfile = os.path.join(tmp, "child.pid")
    c = RawStdio(proxy("--mode", "ignores-eof", "--pid-file", pidfile))
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    time.sleep(0.5)
    child = int(open(pidfile).read())
    os.kill(c.proc.pid, signal.SIGTERM)
    try:
        code = c.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = "still running after 10 s"
    time.sleep(3)
    orphan = alive(child)
    if orphan:
        os.kill(child, signal.SIGKILL)
    if not isinstance(code, int):
        c.proc.kill()
    return (not orphan and isinstance(code, int)), (
        f"SIGTERM: proxy exit {code}; child that ignores EOF and SIGTERM "
        f"{'ORPHANED (still running 3 s later)' if orphan else 'ended'}")


def lifecycle_eof(tmp):
    pidfile = os.path.join(tmp, "child2.pid")
    c = RawStdio(proxy("--mode", "ignores-eof", "--pid-file", pidfile))
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    time.sleep(0.5)
    child = int(open(pidfile).read())
    how = exits_on_eof(c, 10)
    time.sleep(3)
    orphan = alive(child)
    if orphan:
        os.kill(child, signal.SIGKILL)
    return not orphan and "exits" in how, f"{how}; child {'ORPHANED' if orphan else 'ended'}"


def closed_stdout(tmp):
    pidfile = os.path.join(tmp, "child3.pid")
    p = subprocess.Popen(proxy("--pid-file", pidfile), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}).encode() + b"\n")
    p.stdin.flush()
    p.stdout.readline()
    p.stdout.close()
    for i in range(3):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "ping"}).encode() + b"\n")
        p.stdin.flush()
    try:
        code = p.wait(timeout=8)
    except subprocess.TimeoutExpired:
        code = None
    child = int(open(pidfile).read()) if os.path.exists(pidfile) else None
    child_alive = child is not None and alive(child)
    if code is None:
        p.kill()
        p.wait()
    if child_alive:
        time.sleep(1)
        if alive(child):
            os.kill(child, signal.SIGKILL)
    return code is not None and not child_alive, (
        f"client closed the proxy's stdout: proxy {'exit %s' % code if code is not None else 'still running after 8 s'}, "
        f"child {'still running' if child_alive else 'ended'}")


def early_notification(tmp):
    c = RawStdio(proxy())
    c.notify("notifications/initialized")
    time.sleep(1)
    code = c.proc.poll()
    if code is not None:
        return False, f"a notification before initialize: proxy exited with code {code}"
    took, r = timed(c, "initialize", INIT, 20)
    return "result" in r, f"a notification before initialize: proxy kept running; initialize then {describe(r, 80)}; {exits_on_eof(c)}"


def malformed(tmp):
    c = RawStdio(proxy())
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    cases = [
        ("id 2^70", '{"jsonrpc":"2.0","id":1180591620717411303424,"method":"ping"}', 1180591620717411303424),
        ("id 1.5", '{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 1.5),
        ("id true", '{"jsonrpc":"2.0","id":true,"method":"ping"}', True),
        ('jsonrpc "1.0"', '{"jsonrpc":"1.0","id":"v1","method":"ping"}', "v1"),
        ("batch", '[{"jsonrpc":"2.0","id":"b1","method":"ping"}]', "b1"),
        ("lone surrogate", '{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"echo","arguments":{"text":"\\ud800"}}}', "s1"),
        ("unknown method", '{"jsonrpc":"2.0","id":"u1","method":"no/such"}', "u1"),
        ("params not an object", '{"jsonrpc":"2.0","id":"p1","method":"tools/call","params":[1]}', "p1"),
        ("100k-deep nesting", '{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{"name":"echo","arguments":{"text":' + "[" * 100000 + "]" * 100000 + "}}}", "d1"),
    ]
    seen = []
    bad = 0
    for label, line, rid in cases:
        try:
            c.proc.stdin.write(line.encode() + b"\n")
            c.proc.stdin.flush()
        except OSError:
            seen.append(f"{label}: proxy gone before it could be sent (exit {c.proc.poll()})")
            bad += 1
            break
        deadline = time.monotonic() + 5
        answer = None
        while time.monotonic() < deadline and answer is None:
            try:
                raw = c.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except Exception:
                break
            if raw is None:
                answer = "proxy closed stdout"
                break
            try:
                m = json.loads(raw)
            except ValueError:
                continue
            if isinstance(m, list) or (m.get("id") == rid and "method" not in m) or \
                    (m.get("id") is None and "error" in m):
                answer = m
        if c.proc.poll() is not None:
            seen.append(f"{label}: PROXY EXITED {c.proc.returncode}")
            bad += 1
            break
        if answer is None:
            bad += 1
            seen.append(f"{label}: no answer in 5 s")
        else:
            seen.append(f"{label}: {describe(answer, 110)}")
    c.close()
    return bad == 0, " | ".join(seen)


def flaky_retried(tmp):
    counts = os.path.join(tmp, "flaky.json")
    c = RawStdio(proxy("--count-file", counts, "--flaky-failures", "2"))
    timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    took, r = timed(c, "tools/call", {"name": "flaky", "arguments": {}}, 30)
    took2, r2 = timed(c, "tools/call", {"name": "charge", "arguments": {"amount": 5}}, 30)
    n = json.load(open(counts))["tools"]
    c.close()
    ok = n.get("flaky") == 3 and "result" in r and not r["result"].get("isError") and n.get("charge") == 1
    return ok, f"flaky (2 transient isError) → {describe(r, 90)} after {n.get('flaky')} upstream calls in {took:.1f}s; charge ran {n.get('charge')}x"


def http_session(status):
    def run(tmp):
        srv = subprocess.Popen(fake("--http", "0", "--mode", "session-loss", "--session-loss-status", str(status)),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            url = srv.stdout.readline().decode().strip()
            cfg = os.path.join(tmp, f"http{status}.toml")
            with open(cfg, "w") as f:
                f.write(f'[upstream]\nurl = "{url}"\n')
            c = RawStdio(proxy(config=cfg))
            timed(c, "initialize", INIT, 30)
            c.notify("notifications/initialized")
            t0, r0 = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "before"}}, 20)
            srv.send_signal(signal.SIGUSR1)  # the upstream "restarts": sessions forgotten
            time.sleep(0.3)
            t1, r1 = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "after"}}, 25)
            t2, r2 = timed(c, "tools/list", {}, 15)
            ok = "result" in r1 and not r1["result"].get("isError") and "result" in r2
            detail = (f"before: {t0:.1f}s ok; after the session is lost: call {t1:.1f}s → {describe(r1, 110)}; "
                      f"tools/list {t2:.1f}s → {describe(r2, 60)}")
            try:
                c.proc.kill()
                c.proc.wait(timeout=5)
            except Exception:
                pass
            return ok, detail
        finally:
            srv.kill()
            srv.wait()
    return run


def http_progress_burst(tmp):
    srv = subprocess.Popen(fake("--http", "0", "--mode", "progress-burst", "--burst", "20"),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = srv.stdout.readline().decode().strip()
        cfg = os.path.join(tmp, "httpprogress.toml")
        with open(cfg, "w") as f:
            f.write(f'[upstream]\nurl = "{url}"\n')
        c = RawStdio(proxy(config=cfg))
        timed(c, "initialize", INIT, 30)
        c.notify("notifications/initialized")
        before, runs, short_calls = 0, 10, 0
        for i in range(runs):
            _, r = timed(c, "tools/call", {"name": "echo", "arguments": {"text": "x"},
                                           "_meta": {"progressToken": f"h{i}"}}, 20)
            got = sum(1 for n in c.notifications if n.get("method") == "notifications/progress"
                      and n["params"].get("progressToken") == f"h{i}")
            before += got
            short_calls += got < 20
        c.close()
        return before == 20 * runs, (f"over HTTP (SSE): {20 * runs - before} of {20 * runs} progress "
                                     f"notifications missing before their result; {short_calls} of {runs} calls short")
    finally:
        srv.kill()
        srv.wait()


def http_never_answers(tmp):
    srv = subprocess.Popen(fake("--http", "0", "--mode", "accept-and-never-answer"),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = srv.stdout.readline().decode().strip()
        cfg = os.path.join(tmp, "never.toml")
        with open(cfg, "w") as f:
            f.write(f'[upstream]\nurl = "{url}"\n')
        c = RawStdio(proxy(config=cfg))
        took, r = timed(c, "initialize", INIT, 40)
        answered = "failure" not in r
        head = (f"initialize answered after {took:.1f}s: {describe(r, 120)}" if answered
                else f"initialize unanswered after {took:.0f}s")
        return answered and took <= 30, f"{head}; {exits_on_eof(c)}"
    finally:
        srv.kill()
        srv.wait()


def tasks(tmp):
    c = RawStdio(proxy("--mode", "tasks", "--task-seconds", "0.3"))
    took, init = timed(c, "initialize", INIT, 30)
    c.notify("notifications/initialized")
    caps = init.get("result", {}).get("capabilities", {})
    _, lst = timed(c, "tools/list", {}, 20)
    research = [t for t in lst.get("result", {}).get("tools", []) if t["name"] == "research"]
    _, call = timed(c, "tools/call", {"name": "research", "arguments": {"topic": "t"}, "task": {"ttl": 60000}}, 20)
    c.close()
    ok = "tasks" in caps and research and "execution" in research[0] and "task" in call.get("result", {})
    return ok, (f"tasks capability {'kept' if 'tasks' in caps else 'STRIPPED'}; research.execution "
                f"{'kept' if research and 'execution' in research[0] else 'STRIPPED'}; task-augmented call → {describe(call, 140)}")


SCENARIOS = [
    ("never-answers-initialize", handshake("never-answers-initialize")),
    ("garbage-then-sleep", handshake("garbage-then-sleep")),
    ("exit-after-initialize", exit_after_initialize),
    ("oversized-reply", oversized_reply),
    ("progress-burst", progress_burst),
    ("log-flood (slow reader)", log_flood),
    ("unknown tool names", unknown_tools),
    ("3000 hung calls", hung_calls),
    ("ignores-eof + SIGTERM", lifecycle_sigterm),
    ("ignores-eof + stdin EOF", lifecycle_eof),
    ("closed stdout", closed_stdout),
    ("notification before initialize", early_notification),
    ("malformed requests", malformed),
    ("flaky / charge (replay safety)", flaky_retried),
    ("HTTP session loss (400, TS)", http_session(400)),
    ("HTTP session loss (404, Python)", http_session(404)),
    ("HTTP accept-and-never-answer", http_never_answers),
    ("HTTP progress-burst", http_progress_burst),
    ("tasks", tasks),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append")
    args = p.parse_args()
    if not os.access(BIN, os.X_OK):
        sys.exit(f"fault-matrix: no steadfast binary at {BIN}")
    tmp = tempfile.mkdtemp(prefix="steadfast-faults-")
    bad = 0
    print("| fault | holds | what the proxy did |\n|---|---|---|")
    for name, run in SCENARIOS:
        if args.only and name not in args.only:
            continue
        try:
            ok, detail = run(tmp)
        except Exception as e:  # a scenario that breaks is itself a finding
            ok, detail = False, f"scenario error: {type(e).__name__}: {e}"
        bad += not ok
        print(f"| {name} | {'yes' if ok else '**no**'} | {detail} |", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
