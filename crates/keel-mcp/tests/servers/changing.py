"""An MCP server (the official Python SDK's MCPServer) for keel's client tests: a destructive
tool, a tool that adds another and says the tool list changed, its own pid, a slow tool that
records a cancellation, and a tool with a schema keel cannot use (recursive: $ref)."""

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("changing")
marks = os.environ.get("MARKS_DIR", "")


def mark(name: str) -> None:
    if marks:
        with open(os.path.join(marks, name), "w") as f:
            f.write("1")


@server.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
def wipe(target: str) -> str:
    """Pretends to delete `target`."""
    return f"wiped {target}"


class Node(BaseModel):
    name: str
    children: list["Node"] = []


@server.tool()
def tree(root: Node) -> str:
    """Takes a recursive type: its schema needs $ref, which keel cannot offer."""
    return root.name


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and tells the client the list changed."""

    def grown() -> str:
        """A tool that was not there at the start."""
        return "grown here"

    server.add_tool(grown)
    await ctx.session.send_tool_list_changed()
    return "grew"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps; records whether it was cancelled."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark("cancelled")
        raise
    mark("finished")
    return "slept"


if __name__ == "__main__":
    print("changing server ready", file=sys.stderr)
    server.run("stdio")
