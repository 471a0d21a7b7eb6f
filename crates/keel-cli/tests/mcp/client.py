"""An MCP host for keel's tests, on the official MCP Python SDK.

Reads a JSON spec on stdin, connects to `keel mcp-server` (stdio: the command, arguments,
environment and directory given; or streamable HTTP: the URL and bearer token given), runs
the steps and prints one JSON object with each step's result on stdout.

Steps:
  {"op": "list"}                                   -> the tools as the server lists them
  {"op": "call", "name": N, "arguments": {...}}    -> {"is_error", "text", "progress"}
  {"op": "start_and_wait", "arguments": {...}}     -> start_task, then the logging message
                                                      naming the task, then wait_task

With "roots" the host lists those roots; with "elicit" ("accept", "decline", "cancel") it
answers the server's questions so, recording each in "elicited".
"""

import json
import re
import sys

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def run_steps(session, spec, logs, log_arrived):
    out = []
    for step in spec["steps"]:
        op = step["op"]
        if op == "list":
            tools = await session.list_tools()
            out.append([tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools.tools])
        elif op == "call":
            progress = []

            async def on_progress(value, total, message):
                progress.append(message)

            result = await session.call_tool(
                step["name"], step.get("arguments", {}), progress_callback=on_progress
            )
            out.append({"is_error": bool(result.is_error), "text": text_of(result), "progress": progress})
        elif op == "start_and_wait":
            started = await session.call_tool("start_task", step["arguments"])
            text = text_of(started)
            found = re.search(r"Task (\S+) started", text)
            if started.is_error or not found:
                out.append({"start": text, "is_error": bool(started.is_error)})
                continue
            task_id = found.group(1)
            message = None
            with anyio.move_on_after(step.get("timeout", 60)):
                while message is None:
                    for log in logs:
                        if isinstance(log["data"], dict) and log["data"].get("task") == task_id:
                            message = log
                    if message is None:
                        await log_arrived.wait()
                        log_arrived.clear()
            waited = await session.call_tool("wait_task", {"id": task_id, "timeout_secs": 5})
            status = await session.call_tool("task_status", {"id": task_id})
            out.append(
                {
                    "id": task_id,
                    "start": text,
                    "log": message,
                    "wait": text_of(waited),
                    "status": text_of(status),
                }
            )
        else:
            raise ValueError(f"unknown op {op}")
    return out


class Event:
    """An event that can be waited for again after `clear`."""

    def __init__(self):
        self._event = anyio.Event()

    def set(self):
        self._event.set()

    def clear(self):
        if self._event.is_set():
            self._event = anyio.Event()

    async def wait(self):
        await self._event.wait()


async def main():
    spec = json.load(sys.stdin)
    logs = []
    log_arrived = Event()

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})
        log_arrived.set()

    kwargs = {"logging_callback": on_log}
    elicited = []
    if spec.get("elicit") is not None:

        async def elicit(context, params):
            elicited.append({"message": params.message, "schema": params.requested_schema})
            if spec["elicit"] == "accept":
                return types.ElicitResult(action="accept", content={"approve": True})
            return types.ElicitResult(action=spec["elicit"])

        kwargs["elicitation_callback"] = elicit
    if spec.get("roots") is not None:

        async def list_roots(context):
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in spec["roots"]])

        kwargs["list_roots_callback"] = list_roots

    if spec.get("url"):
        headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            async with streamable_http_client(spec["url"], http_client=http) as (read, write, *_):
                async with ClientSession(read, write, **kwargs) as session:
                    await session.initialize()
                    out = await run_steps(session, spec, logs, log_arrived)
    else:
        params = StdioServerParameters(
            command=spec["command"], args=spec["args"], env=spec.get("env"), cwd=spec.get("cwd")
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **kwargs) as session:
                await session.initialize()
                out = await run_steps(session, spec, logs, log_arrived)
    print(json.dumps({"steps": out, "logs": logs, "elicited": elicited}, default=str))


anyio.run(main)
