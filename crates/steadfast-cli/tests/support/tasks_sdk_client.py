#!/usr/bin/env python3
"""The Python MCP SDK's own task client (mcp 1.30.0, MCP 2025-11-25 tasks) through `steadfast proxy`.

Session 1 starts a durable call to the fake upstream's `flaky` tool with
`session.experimental.call_tool_as_task`, waits until its first attempt has failed and its retry
is scheduled, then SIGKILLs the gateway (found as the parent of the fake upstream, whose pid is
in PID_FILE). Session 2 starts a new gateway on the same store, polls the task with
`poll_task` until it is terminal and reads its result with `get_task_result`.

Usage: tasks_sdk_client.py STEADFAST CONFIG FAKE_UPSTREAM COUNT_FILE PID_FILE
Prints one JSON line with what it saw. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import warnings

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

warnings.simplefilter("ignore", DeprecationWarning)  # the SDK's experimental tasks API


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("PPid:"):
                return int(line.split()[1])
    raise RuntimeError(f"no parent for {pid}")


async def main() -> None:
    steadfast, config, fake, counts, pid_file = sys.argv[1:6]
    params = StdioServerParameters(
        command=steadfast,
        args=["proxy", "--config", config, "--", sys.executable, fake, "--count-file", counts,
              "--pid-file", pid_file, "--flaky-failures", "1", "--flaky-across-restarts"],
    )
    seen: dict = {}
    try:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                with anyio.fail_after(20):
                    await s.initialize()
                    tools = await s.list_tools()
                    flaky = next(t for t in tools.tools if t.name == "flaky")
                    seen["task_support"] = flaky.execution.taskSupport if flaky.execution else None
                    created = await s.experimental.call_tool_as_task("flaky", {}, ttl=60000)
                    seen["task_id"] = created.task.taskId
                    seen["created_status"] = created.task.status
                    while True:
                        status = await s.experimental.get_task(seen["task_id"])
                        if status.statusMessage and "retry scheduled" in status.statusMessage:
                            break
                        await anyio.sleep(0.1)
                seen["status_before_kill"] = status.status
                with open(pid_file, encoding="utf-8") as f:
                    os.kill(parent_of(int(f.read())), signal.SIGKILL)
                seen["killed"] = True
    except Exception:  # the session breaks when its gateway dies: that is the point
        if not seen.get("killed"):
            raise

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            with anyio.fail_after(30):
                await s.initialize()
                async for status in s.experimental.poll_task(seen["task_id"]):
                    seen["final_status"] = status.status
                result = await s.experimental.get_task_result(seen["task_id"], CallToolResult)
                seen["text"] = result.content[0].text if result.content else None
                seen["is_error"] = result.isError
                listed = await s.experimental.list_tasks()
                seen["listed"] = [t.taskId for t in listed.tasks]
    print(json.dumps(seen))


if __name__ == "__main__":
    anyio.run(main)
