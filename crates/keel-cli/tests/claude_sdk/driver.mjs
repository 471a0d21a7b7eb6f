// Drives keel through the official Claude Agent SDK for TypeScript
// (`@anthropic-ai/claude-agent-sdk`), with the built keel binary as
// `pathToClaudeCodeExecutable`, and prints one JSON line per message the SDK yields.
//
//   node driver.mjs <sdk package dir> SCENARIO
//
// Environment as for driver.py: KEEL_BIN, REPO, PROMPTS (a JSON list), and keel's own, which
// the SDK passes on. Scenarios: query, client, deny, interrupt, hook, image, mcp (as in driver.py).

import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, scenario] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(sdkDir, "sdk.mjs")).href);
const { z } = await import(pathToFileURL(path.join(sdkDir, "..", "..", "zod", "index.js")).href);

const emit = (fields) => process.stdout.write(JSON.stringify(fields) + "\n");
const prompts = JSON.parse(process.env.PROMPTS);

function show(message) {
  const out = { kind: "message", type: message.type, subtype: message.subtype };
  if (message.type === "assistant") {
    out.model = message.message.model;
    out.content = message.message.content;
  }
  if (message.type === "result") {
    Object.assign(out, {
      result: message.result,
      is_error: message.is_error,
      session_id: message.session_id,
      num_turns: message.num_turns,
    });
  }
  emit(out);
}

function options(extra) {
  return {
    pathToClaudeCodeExecutable: process.env.KEEL_BIN,
    cwd: process.env.REPO,
    env: process.env,
    stderr: (text) => process.stderr.write(text),
    ...extra,
  };
}

async function run(prompt, extra) {
  for await (const message of sdk.query({ prompt, options: options(extra) })) {
    show(message);
  }
}

async function* streamed(text) {
  yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
}

try {
  if (scenario === "query") {
    for (const prompt of prompts) {
      await run(prompt, { permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true });
    }
  } else if (scenario === "client" || scenario === "interrupt") {
    // One session: the next prompt is sent once the previous one's result has come; for
    // "interrupt", the first turn is interrupted after INTERRUPT_AFTER seconds.
    let answered = () => {};
    async function* conversation() {
      for (const prompt of prompts) {
        const done = new Promise((resolve) => (answered = resolve));
        yield* streamed(prompt);
        await done;
      }
    }
    const q = sdk.query({
      prompt: conversation(),
      options: options({ permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true }),
    });
    if (scenario === "interrupt") {
      const wait = Number(process.env.INTERRUPT_AFTER ?? "1") * 1000;
      setTimeout(async () => {
        await q.interrupt();
        emit({ kind: "interrupted" });
      }, wait);
    }
    for await (const message of q) {
      show(message);
      if (message.type === "result") {
        answered();
      }
    }
  } else if (scenario === "deny") {
    const canUseTool = async (tool, input) => {
      emit({ kind: "asked", tool, input });
      return tool === "write_file"
        ? { behavior: "deny", message: "the program does not allow writes" }
        : { behavior: "allow", updatedInput: input };
    };
    for (const prompt of prompts) {
      await run(streamed(prompt), { canUseTool });
    }
  } else if (scenario === "hook") {
    const noRm = async (input, toolUseId) => {
      emit({
        kind: "hook",
        event: input.hook_event_name,
        tool: input.tool_name,
        input: input.tool_input,
        tool_use_id: toolUseId,
        input_tool_use_id: input.tool_use_id,
        permission_mode: input.permission_mode,
        transcript_path: input.transcript_path,
      });
      if ((input.tool_input?.command ?? "").includes("rm")) {
        return {
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            permissionDecision: "deny",
            permissionDecisionReason: "the program forbids rm",
          },
        };
      }
      if ((input.tool_input?.command ?? "").startsWith("echo ")) {
        return {
          systemMessage: "the program rewrote an echo",
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            permissionDecision: "allow",
            updatedInput: { command: "echo rewritten by the program" },
          },
        };
      }
      return {};
    };
    for (const prompt of prompts) {
      await run(prompt, {
        permissionMode: "bypassPermissions",
        allowDangerouslySkipPermissions: true,
        hooks: { PreToolUse: [{ matcher: "Bash", hooks: [noRm] }] },
      });
    }
  } else if (scenario === "image") {
    async function* withImage(text) {
      yield {
        type: "user",
        parent_tool_use_id: null,
        session_id: "",
        message: {
          role: "user",
          content: [
            { type: "text", text },
            { type: "image", source: { type: "base64", media_type: "image/png", data: process.env.IMAGE_PNG } },
          ],
        },
      };
    }
    for (const prompt of prompts) {
      await run(withImage(prompt), { permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true });
    }
  } else if (scenario === "mcp") {
    const add = sdk.tool("add", "Adds two numbers.", { a: z.number(), b: z.number() }, async (args) => {
      emit({ kind: "tool_ran", args });
      return { content: [{ type: "text", text: `sum: ${args.a + args.b}` }] };
    });
    const calc = sdk.createSdkMcpServer({ name: "calc", version: "1.0.0", tools: [add] });
    for (const prompt of prompts) {
      await run(streamed(prompt), {
        permissionMode: "bypassPermissions",
        allowDangerouslySkipPermissions: true,
        mcpServers: { calc },
      });
    }
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} catch (err) {
  emit({ kind: "error", error: err?.name, message: String(err?.message ?? err).slice(0, 2000) });
  process.exit(1);
}
