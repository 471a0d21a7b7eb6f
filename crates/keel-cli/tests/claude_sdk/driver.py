"""Drives keel through the official Claude Agent SDK for Python (`claude-agent-sdk`), with the
built keel binary as `cli_path`, and prints one JSON line per message the SDK yields.

    python driver.py SCENARIO

Environment: KEEL_BIN (the keel binary), REPO (the session's working directory), PROMPTS
(a JSON list of prompts), and keel's own (HOME, KEEL_HOME, ANTHROPIC_*), which the SDK
passes on to keel. Scenarios:

    query       query() with each prompt in turn (one session per prompt), bypassPermissions
    client      ClaudeSDKClient: every prompt in one session, bypassPermissions
    deny        query() whose can_use_tool callback denies every write_file call
    interrupt   ClaudeSDKClient: the first prompt is interrupted once the model has been
                asked (INTERRUPT_AFTER seconds), then the second prompt runs
    hook        query() with a PreToolUse hook on Bash (keel's run_command) that rewrites echo
                and denies
                every command containing "rm"
    image       query() with a prompt of text and a PNG (IMAGE_PNG, base64)
    mcp         query() with an in-process SDK MCP server `calc` whose `add` tool the
                model calls as mcp__calc__add

Lines: {"kind": "message", "class": ..., ...fields} for each message; {"kind": "asked",
"tool": ..., "input": ...} for each permission question; {"kind": "error", ...} when the SDK
raises (message parse errors among them).
"""

import json
import os
import sys

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)


def emit(**fields):
    print(json.dumps(fields), flush=True)


def block_json(block):
    kind = type(block).__name__
    out = {"type": kind}
    for name in ("text", "name", "input", "id", "tool_use_id", "content", "is_error"):
        if hasattr(block, name):
            out[name] = getattr(block, name)
    return out


def show(message):
    if isinstance(message, AssistantMessage):
        emit(kind="message", cls="AssistantMessage", model=message.model,
             content=[block_json(b) for b in message.content])
    elif isinstance(message, UserMessage):
        content = message.content
        if not isinstance(content, str):
            content = [block_json(b) for b in content]
        emit(kind="message", cls="UserMessage", content=content)
    elif isinstance(message, SystemMessage):
        emit(kind="message", cls="SystemMessage", subtype=message.subtype,
             session_id=message.data.get("session_id"))
    elif isinstance(message, ResultMessage):
        emit(kind="message", cls="ResultMessage", subtype=message.subtype,
             is_error=message.is_error, result=message.result, num_turns=message.num_turns,
             session_id=message.session_id, duration_api_ms=message.duration_api_ms)
    else:
        emit(kind="message", cls=type(message).__name__)


def options(**extra):
    return ClaudeAgentOptions(cli_path=os.environ["KEEL_BIN"], cwd=os.environ["REPO"], **extra)


async def prompts_stream(text):
    # can_use_tool needs the streaming form of the prompt.
    yield {"type": "user", "message": {"role": "user", "content": text},
           "parent_tool_use_id": None, "session_id": ""}


async def main(scenario):
    prompts = json.loads(os.environ["PROMPTS"])
    if scenario == "query":
        for prompt in prompts:
            async for message in query(prompt=prompt, options=options(permission_mode="bypassPermissions")):
                show(message)
    elif scenario == "client":
        async with ClaudeSDKClient(options=options(permission_mode="bypassPermissions")) as client:
            for prompt in prompts:
                await client.query(prompt)
                async for message in client.receive_response():
                    show(message)
    elif scenario == "deny":
        async def can_use_tool(tool, tool_input, context):
            emit(kind="asked", tool=tool, input=tool_input)
            if tool == "write_file":
                return PermissionResultDeny(message="the program does not allow writes")
            return PermissionResultAllow()

        for prompt in prompts:
            async for message in query(prompt=prompts_stream(prompt),
                                       options=options(can_use_tool=can_use_tool)):
                show(message)
    elif scenario == "interrupt":
        wait = float(os.environ.get("INTERRUPT_AFTER", "1"))
        async with ClaudeSDKClient(options=options(permission_mode="bypassPermissions")) as client:
            await client.query(prompts[0])
            await anyio.sleep(wait)
            await client.interrupt()
            emit(kind="interrupted")
            async for message in client.receive_response():
                show(message)
            await client.query(prompts[1])
            async for message in client.receive_response():
                show(message)
    elif scenario == "hook":
        async def no_rm(hook_input, tool_use_id, context):
            emit(kind="hook", event=hook_input.get("hook_event_name"),
                 tool=hook_input.get("tool_name"), input=hook_input.get("tool_input"),
                 tool_use_id=tool_use_id, input_tool_use_id=hook_input.get("tool_use_id"),
                 permission_mode=hook_input.get("permission_mode"),
                 transcript_path=hook_input.get("transcript_path"))
            if "rm" in (hook_input.get("tool_input") or {}).get("command", ""):
                return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                               "permissionDecision": "deny",
                                               "permissionDecisionReason": "the program forbids rm"}}
            if (hook_input.get("tool_input") or {}).get("command", "").startswith("echo "):
                return {"systemMessage": "the program rewrote an echo",
                        "hookSpecificOutput": {"hookEventName": "PreToolUse",
                                               "permissionDecision": "allow",
                                               "updatedInput": {"command": "echo rewritten by the program"}}}
            return {}

        hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[no_rm])]}
        for prompt in prompts:
            async for message in query(prompt=prompt, options=options(
                    permission_mode="bypassPermissions", hooks=hooks)):
                show(message)
    elif scenario == "image":
        async def with_image(text):
            yield {"type": "user", "parent_tool_use_id": None, "session_id": "",
                   "message": {"role": "user", "content": [
                       {"type": "text", "text": text},
                       {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                    "data": os.environ["IMAGE_PNG"]}}]}}

        for prompt in prompts:
            async for message in query(prompt=with_image(prompt),
                                       options=options(permission_mode="bypassPermissions")):
                show(message)
    elif scenario == "mcp":
        @tool("add", "Adds two numbers.", {"a": float, "b": float})
        async def add(args):
            emit(kind="tool_ran", args=args)
            return {"content": [{"type": "text", "text": f"sum: {args['a'] + args['b']}"}]}

        calc = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
        for prompt in prompts:
            async for message in query(prompt=prompt, options=options(
                    permission_mode="bypassPermissions", mcp_servers={"calc": calc})):
                show(message)
    else:
        raise SystemExit(f"unknown scenario {scenario}")


try:
    anyio.run(main, sys.argv[1])
except Exception as err:  # the test reads what went wrong
    emit(kind="error", error=type(err).__name__, message=str(err)[:2000])
    sys.exit(1)
