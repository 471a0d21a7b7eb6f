// An ACP client on the official TypeScript SDK (@agentclientprotocol/sdk, its client app:
// `client()`, `ndJsonStream`, `connectWith`) that starts an agent, runs a scenario and prints
// one JSON line per event, in the order the agent's messages arrived.
//
//   node sdk_client.mjs <sdk package dir> <scenario JSON>
//
// The scenario:
//   {
//     "agent": ["/path/to/keel", "acp"],      // spawned with this process's environment
//     "permissions": ["reject_once", ...],    // per permission request, in order (the last
//                                             // repeats): an option kind or optionId to
//                                             // select, or "cancelled"; default allow_once
//     "files": {"/abs/path": "text"},        // the editor's buffers: fs/read_text_file
//                                             // answers these (others: an error);
//                                             // fs/write_text_file is answered ok
//     "timeoutMs": 90000,
//     "steps": [
//       {"op": "initialize", "clientCapabilities": {...}},
//       {"op": "new", "cwd": "/abs", "mcpServers": [...]},
//       {"op": "load", "sessionId": "...", "cwd": "/abs", "mcpServers": [...]},
//       {"op": "setMode", "modeId": "read-only"},
//       {"op": "prompt", "text": "...",
//        "cancel": {"afterUpdates": 1} | {"afterUpdate": "tool_call_update"} | {"afterMs": 500}}
//     ]
//   }
//
// Events (stdout, one JSON object a line):
//   {"event": "update", "sessionId", "update"}              every session/update
//   {"event": "permission_request", "id", "params"}         every session/request_permission
//   {"event": "permission_answer", "toolCallId", "outcome"} what this client answered
//   {"event": "fs_read" | "fs_write", "path", "content"}     a file asked for or written
//   {"event": "agent_request" | "notification", "method", "params"}   anything else the agent sent
//   {"event": "response", "method", "id", "result", "elapsedMs"}     a reply to our request
//   {"event": "error", "method", "id", "error", "elapsedMs"}         an error reply
//   {"event": "cancel_sent", "sessionId"}
//   {"event": "rejected", "op", "message"}                  a request of a step failed in the SDK
//   {"event": "schema_error", "where", "issues"}            a message that breaks the ACP schema
//   {"event": "sdk_error", "message"}                       anything the SDK logged as an error
//   {"event": "exit", "code", "signal"}                     the agent's exit
//   {"event": "summary", "updates", "updatesHandled"}       session/updates seen on the wire vs.
//                                                           accepted by the SDK's handler
//   {"event": "timeout"}                                    the scenario ran out of time
//
// Every message the agent sends is checked against the SDK's own zod schemas for ACP v1
// (notifications and requests are also parsed by the SDK's handlers; replies are checked
// here, since the SDK does not check them).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";
import util from "node:util";

const [sdkDir, scenarioText] = process.argv.slice(2);
if (!sdkDir || !scenarioText) {
  process.stderr.write("usage: node sdk_client.mjs <sdk dir> <scenario JSON>\n");
  process.exit(64);
}
const scenario = JSON.parse(scenarioText);

const load = (file) => import(pathToFileURL(path.join(sdkDir, file)).href);
const acp = await load("dist/v1/stable/acp.js");
const zod = await load("dist/v1/schema/zod.gen.js");

const started = Date.now();
function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

// The SDK reports what it drops (an invalid notification, a reply to nothing) on the console.
for (const level of ["error", "warn"]) {
  console[level] = (...args) => emit({ event: "sdk_error", level, message: util.format(...args) });
}

function check(schema, value, where) {
  if (!schema) {
    return;
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    emit({ event: "schema_error", where, issues: parsed.error.issues, value });
  }
}

const replySchemas = {
  initialize: zod.zInitializeResponse,
  "session/new": zod.zNewSessionResponse,
  "session/load": zod.zLoadSessionResponse,
  "session/prompt": zod.zPromptResponse,
  "session/set_mode": zod.zSetSessionModeResponse,
};

const agent = spawn(scenario.agent[0], scenario.agent.slice(1), {
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => {
  agent.on("exit", (code, signal) => resolve({ code, signal }));
});
agent.on("error", (err) => emit({ event: "sdk_error", message: `spawn: ${err.message}` }));

const watchdog = setTimeout(() => {
  emit({ event: "timeout" });
  agent.kill("SIGKILL");
  process.exit(2);
}, scenario.timeoutMs ?? 90_000);

const wire = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

// Our requests on the way out (their method and when they left), so replies can be checked
// against the right schema.
const sent = new Map();
const writer = wire.writable.getWriter();
const writable = new WritableStream({
  write(message) {
    if ("method" in message && "id" in message) {
      sent.set(message.id, { method: message.method, at: Date.now() });
    }
    return writer.write(message);
  },
  close() {
    return writer.close();
  },
  abort(reason) {
    return writer.abort(reason);
  },
});

// The agent's messages on the way in, in wire order.
let updatesOnWire = 0;
function observe(message) {
  if (typeof message !== "object" || message === null) {
    emit({ event: "schema_error", where: "message", issues: [], value: message });
    return;
  }
  if ("method" in message) {
    const { method, params } = message;
    if (method === "session/update") {
      updatesOnWire += 1;
      check(zod.zSessionNotification, params, method);
      emit({ event: "update", sessionId: params?.sessionId, update: params?.update });
    } else if (method === "session/request_permission") {
      check(zod.zRequestPermissionRequest, params, method);
      emit({ event: "permission_request", id: message.id, params });
    } else if (method === "fs/read_text_file") {
      check(zod.zReadTextFileRequest, params, method);
    } else if (method === "fs/write_text_file") {
      check(zod.zWriteTextFileRequest, params, method);
    } else if ("id" in message) {
      emit({ event: "agent_request", method, id: message.id, params });
    } else {
      emit({ event: "notification", method, params });
    }
    return;
  }
  const request = sent.get(message.id);
  const method = request?.method;
  const elapsedMs = request ? Date.now() - request.at : undefined;
  if ("error" in message) {
    emit({ event: "error", method, id: message.id, error: message.error, elapsedMs });
  } else {
    check(replySchemas[method], message.result, `${method} reply`);
    emit({ event: "response", method, id: message.id, result: message.result, elapsedMs });
  }
}
const readable = wire.readable.pipeThrough(
  new TransformStream({
    transform(message, controller) {
      observe(message);
      controller.enqueue(message);
    },
  }),
);

// Updates the SDK accepted (parsed against its schema) and handed to our handler; waiters
// for "cancel after ..." triggers.
let updatesHandled = 0;
let turnUpdates = [];
let waiters = [];
function onUpdate(notification) {
  updatesHandled += 1;
  turnUpdates.push(notification.update);
  waiters = waiters.filter((waiter) => !waiter(turnUpdates));
}
function until(test) {
  return new Promise((resolve) => {
    const waiter = (updates) => {
      if (test(updates)) {
        resolve();
        return true;
      }
      return false;
    };
    if (!waiter(turnUpdates)) {
      waiters.push(waiter);
    }
  });
}

const picks = [...(scenario.permissions ?? ["allow_once"])];
function answer(params) {
  const pick = picks.length > 1 ? picks.shift() : picks[0];
  if (pick === "cancelled") {
    return { outcome: { outcome: "cancelled" } };
  }
  const option = params.options.find((o) => o.optionId === pick || o.kind === pick);
  if (!option) {
    emit({ event: "sdk_error", message: `no option ${pick} in ${JSON.stringify(params.options)}` });
    return { outcome: { outcome: "cancelled" } };
  }
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

const app = acp
  .client({ name: "keel-sdk-test" })
  .onNotification("session/update", ({ params }) => onUpdate(params))
  .onRequest("session/request_permission", ({ params }) => {
    const response = answer(params);
    emit({ event: "permission_answer", toolCallId: params.toolCall.toolCallId, ...response });
    return response;
  })
  .onRequest("fs/read_text_file", ({ params }) => {
    const content = (scenario.files ?? {})[params.path];
    emit({ event: "fs_read", path: params.path, content: content ?? null });
    if (content === undefined) {
      throw new Error(`no buffer for ${params.path}`);
    }
    return { content };
  })
  .onRequest("fs/write_text_file", ({ params }) => {
    emit({ event: "fs_write", path: params.path, content: params.content });
    return {};
  });

// Lets pending notification handlers run before the next step.
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function prompt(ctx, sessionId, step) {
  turnUpdates = [];
  waiters = [];
  let settled = false;
  const reply = ctx
    .request("session/prompt", { sessionId, prompt: [{ type: "text", text: step.text }] })
    .finally(() => {
      settled = true;
    });
  if (step.cancel) {
    const { afterUpdates, afterUpdate, afterMs } = step.cancel;
    const trigger =
      afterMs !== undefined
        ? sleep(afterMs)
        : afterUpdate !== undefined
          ? until((updates) => updates.some((u) => u.sessionUpdate === afterUpdate))
          : until((updates) => updates.length >= (afterUpdates ?? 1));
    await Promise.race([trigger, reply.catch(() => {})]);
    if (!settled) {
      await ctx.notify("session/cancel", { sessionId });
      emit({ event: "cancel_sent", sessionId });
    }
  }
  await reply;
}

async function run(ctx) {
  let sessionId;
  for (const step of scenario.steps) {
    try {
      switch (step.op) {
        case "initialize":
          await ctx.request("initialize", {
            protocolVersion: step.protocolVersion ?? acp.PROTOCOL_VERSION,
            clientCapabilities: step.clientCapabilities ?? {},
          });
          break;
        case "new": {
          const created = await ctx.request("session/new", {
            cwd: step.cwd,
            mcpServers: step.mcpServers ?? [],
          });
          sessionId = created.sessionId;
          break;
        }
        case "load":
          await ctx.request("session/load", {
            sessionId: step.sessionId,
            cwd: step.cwd,
            mcpServers: step.mcpServers ?? [],
          });
          sessionId = step.sessionId;
          break;
        case "setMode":
          await ctx.request("session/set_mode", { sessionId, modeId: step.modeId });
          break;
        case "prompt":
          await prompt(ctx, step.sessionId ?? sessionId, step);
          break;
        default:
          throw new Error(`unknown step ${JSON.stringify(step)}`);
      }
    } catch (err) {
      emit({ event: "rejected", op: step.op, code: err?.code, message: String(err?.message ?? err) });
    }
    await settle();
  }
}

try {
  await app.connectWith({ writable, readable }, run);
} catch (err) {
  emit({ event: "sdk_error", message: `connection: ${String(err?.message ?? err)}` });
}
agent.stdin.end();
const exit = await Promise.race([exited, sleep(15_000).then(() => null)]);
if (exit === null) {
  agent.kill("SIGKILL");
  emit({ event: "exit", code: null, signal: "SIGKILL (did not exit after stdin closed)" });
} else {
  emit({ event: "exit", ...exit });
}
emit({ event: "summary", updates: updatesOnWire, updatesHandled, ms: Date.now() - started });
clearTimeout(watchdog);
process.exit(0);
