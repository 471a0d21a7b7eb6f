#!/usr/bin/env bash
# keel against a small local model's server: the size of `keel exec`'s first request, and what
# asking the server for its context window costs at start.
#
# The server is a tiny Python one on loopback speaking the OpenAI-compatible wire (a short
# Chat Completions stream) and, as asked, Ollama's `POST /api/show` (a model whose parameters
# say `num_ctx 131072`: no lean choice, no warning). The repository is a typical small
# project: AGENTS.md, a skill, a sub-agent, a team, a source file and some git history.
#
#   bytes    the first request's body, as received, for each profile given in PROFILES
#            (default "full lean"; `default` runs without --tools), and its estimated tokens
#            (bytes / 4, keel's estimate)
#   start    spawn -> first chat request, median of N runs (default 20), interleaved:
#              ollama   the server answers /api/show: one probe request
#              silent   the server answers 404 to every probe (llama.cpp's /props and vLLM's
#                       listing too): the most probe requests keel sends
#            and the probe's own time as the server sees it (first probe request in -> chat
#            request in, less nothing: the agent is built after the probe, so this is an
#            upper bound)
#
#   cargo build --release -p keel-cli && benches/local_model.sh [path/to/keel] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(rustc -vV | sed -n 's/^host: //p')
keel=${1:-${CARGO_TARGET_DIR:-target}/$host/release/keel}
runs=${2:-20}
[ -x "$keel" ] || { echo "no keel binary at $keel: cargo build --release -p keel-cli" >&2; exit 2; }
keel=$(realpath "$keel")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo="$work/repo"
mkdir -p "$repo/src" "$repo/.keel/skills/release" "$repo/.keel/agents" "$repo/.keel/teams" \
    "$work/home/keel"
printf 'Run `cargo test` before you answer.\n' >"$repo/AGENTS.md"
printf -- '---\nname: release\ndescription: How to cut a release\n---\nTag, then publish.\n' \
    >"$repo/.keel/skills/release/SKILL.md"
printf -- '---\ndescription: Reviews a change\ntools: [read_file, grep]\n---\nYou review.\n' \
    >"$repo/.keel/agents/reviewer.md"
printf 'name: ship\ndescription: Review then ship\nagents: [reviewer]\n' \
    >"$repo/.keel/teams/ship.yaml"
printf 'pub fn answer() -> u32 { 42 }\n' >"$repo/src/lib.rs"
git -C "$repo" init -q
git -C "$repo" -c user.name=bench -c user.email=bench@example.com add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -qm start

PROFILES=${PROFILES:-"full lean"} python3 - "$keel" "$runs" "$work" <<'PY'
import json, os, socket, statistics, subprocess, sys, threading, time

keel, runs, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
repo = os.path.join(work, "repo")
chunks = [
    {"id": "c1", "object": "chat.completion.chunk", "model": "qwen3:8b",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
    {"id": "c1", "object": "chat.completion.chunk", "model": "qwen3:8b",
     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
]
stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
show = json.dumps({
    "parameters": "num_ctx                        131072",
    "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 131072},
}).encode()

def response(status, ctype, body):
    return (f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n"
            "connection: keep-alive\r\n\r\n").encode() + body

state = {"ollama": True}
chats = []        # (arrival, body)
probes = []       # arrival of each probe request

def handle(conn):
    conn.settimeout(10)
    data = b""
    try:
        while True:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            arrival = time.monotonic()
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, target = lines[0].split(b" ")[:2]
            length = 0
            for line in lines[1:]:
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            body, data = rest[:length], rest[length:]
            path = target.split(b"?")[0]
            if path.endswith(b"/chat/completions"):
                chats.append((arrival, body))
                conn.sendall(response("200 OK", "text/event-stream", stream))
                return
            probes.append(arrival)
            if path == b"/api/show" and state["ollama"]:
                conn.sendall(response("200 OK", "application/json", show))
            else:
                conn.sendall(response("404 Not Found", "text/plain", b"404 page not found"))
    finally:
        conn.close()

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
port = listener.getsockname()[1]

def serve():
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()

threading.Thread(target=serve, daemon=True).start()
env = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.path.join(work, "home"),
    "KEEL_HOME": os.path.join(work, "home", "keel"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "NO_COLOR": "1",
    "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
}
prompt = "What does answer() return?"

def run(args):
    count, probed = len(chats), len(probes)
    start = time.monotonic()
    proc = subprocess.run([keel, "exec", "--model", "qwen3:8b"] + args + [prompt], cwd=repo,
                          env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0 or len(chats) != count + 1:
        sys.exit(f"keel exec failed ({proc.returncode}): {proc.stderr.decode()}")
    arrival, body = chats[count]
    first_probe = probes[probed] if len(probes) > probed else None
    return (arrival - start) * 1000, body, first_probe, arrival, proc.stderr.decode()

for profile in os.environ["PROFILES"].split():
    args = [] if profile == "default" else ["--tools", profile]
    _, body, _, _, err = run(args)
    request = json.loads(body)
    if os.environ.get("DUMP"): open(os.environ["DUMP"] + "." + profile, "wb").write(body)
    tools = [t["function"]["name"] for t in request.get("tools", [])]
    system = next((m["content"] for m in request["messages"] if m["role"] == "system"), "")
    tool_bytes = len(json.dumps(request.get("tools", []), separators=(",", ":")))
    print(f"{profile}: first request {len(body)} bytes (~{(len(body) + 3) // 4} tokens); "
          f"system prompt {len(system)} bytes, {len(tools)} tools {tool_bytes} bytes: "
          f"{', '.join(tools)}")
    for line in err.splitlines():
        print(f"  stderr: {line}")

def report(what, times):
    times = sorted(times)
    print(f"{what}: median {statistics.median(times):.2f} ms, min {times[0]:.2f} ms, "
          f"max {times[-1]:.2f} ms over {len(times)} runs")

starts = {"ollama": [], "silent": []}
probe_times = {"ollama": [], "silent": []}
for _ in range(runs):
    for kind in ("ollama", "silent"):
        state["ollama"] = kind == "ollama"
        took, _, first_probe, arrival, _ = run([])
        starts[kind].append(took)
        if first_probe is not None:
            probe_times[kind].append((arrival - first_probe) * 1000)
for kind in starts:
    report(f"start, server {kind}: spawn -> first chat request", starts[kind])
    if probe_times[kind]:
        report(f"  first probe request -> chat request ({kind})", probe_times[kind])
    else:
        print(f"  no probe requests ({kind})")
PY
