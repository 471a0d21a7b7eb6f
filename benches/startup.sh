#!/usr/bin/env bash
# Start-up of the built `keel` binary: time from exec to the first model request arriving at
# a loopback HTTP server (a tiny Python server that answers with a short Anthropic stream),
# median of N runs (default 20), three ways, interleaved:
#   exec     from a timestamp taken right before `execve` (benches/stamp_exec.rs, built here
#            with rustc, prints the time and execs keel in the same process): the target's
#            measure;
#   sh+date  from a timestamp `date` prints before `sh` execs keel (conservative: date's exit
#            and the shell's wait are counted too, 0.3-0.8 ms on a 2-core VM; the measure of
#            notes before 2026-11-24);
#   spawn    from when Python begins to spawn the process (its fork counted).
# Beside them, interleaved too, the host's floor: exec -> main of a minimal Rust program
# (stamp_exec --now), which a busy host (a contended VM) slows as much as it slows keel.
# With strace installed, also counts the files one run opens under the system certificate
# directories (expected: 0 for an http:// endpoint).
#
#   cargo build --release -p keel-cli && benches/startup.sh [path/to/keel] [runs]
#
# Target: <= 5 ms from exec to the first request.
set -euo pipefail
cd "$(dirname "$0")/.."

# .cargo/config.toml names the host as the target: binaries are under target/<host triple>/.
host=$(rustc -vV | sed -n 's/^host: //p')
keel=${1:-${CARGO_TARGET_DIR:-target}/$host/release/keel}
runs=${2:-20}
[ -x "$keel" ] || { echo "no keel binary at $keel: cargo build --release -p keel-cli" >&2; exit 2; }
keel=$(realpath "$keel")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo" "$work/home/keel"
git -C "$work/repo" init -q
printf 'hello\n' >"$work/repo/README.md"
rustc -O --edition 2024 -o "$work/stamp_exec" benches/stamp_exec.rs

python3 - "$keel" "$runs" "$work" "$work/stamp_exec" <<'PY'
import os, socket, statistics, subprocess, sys, threading, time, shutil

keel, runs, work, stamp_exec = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
events = [
    ("message_start", '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}'),
    ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":0}'),
    ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}'),
    ("message_stop", '{"type":"message_stop"}'),
]
body = "".join(f"event: {name}\ndata: {data}\n\n" for name, data in events).encode()
reply = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
         + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
port = listener.getsockname()[1]
arrivals = []
wall_arrivals = []

def serve():
    while True:
        conn, _ = listener.accept()
        conn.settimeout(5)
        data = b""
        try:
            first = None
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                if first is None:
                    first = time.monotonic()
                    first_wall = time.time()
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                rest += chunk
            if first is not None:
                arrivals.append(first)
                wall_arrivals.append(first_wall)
            conn.sendall(reply)
        finally:
            conn.close()

threading.Thread(target=serve, daemon=True).start()
env = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.path.join(work, "home"),
    "KEEL_HOME": os.path.join(work, "home", "keel"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "NO_COLOR": "1",
    "ANTHROPIC_API_KEY": "sk-ant-startup-bench",
    "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
}
argv = [keel, "exec", "Say ok."]
repo = os.path.join(work, "repo")

def one(cmd):
    count = len(arrivals)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0 or len(arrivals) != count + 1:
        sys.exit(f"keel exec failed ({proc.returncode}): {proc.stderr.decode()}")
    return (arrivals[count] - start) * 1000

def stamped(prefix):
    """Milliseconds from the time the first line of stderr gives to the request's arrival."""
    count = len(arrivals)
    proc = subprocess.run(prefix + argv, cwd=repo, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0 or len(arrivals) != count + 1:
        sys.exit(f"keel exec failed ({proc.returncode}): {proc.stderr.decode()}")
    stamp = int(proc.stderr.decode().splitlines()[0]) / 1e9
    return (wall_arrivals[count] - stamp) * 1000

def from_exec():
    return stamped([stamp_exec])

def floor():
    """Milliseconds from exec to main of a minimal Rust program (stamp_exec --now)."""
    proc = subprocess.run([stamp_exec, stamp_exec, "--now"], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    before, at_main = (int(line) for line in proc.stderr.decode().split())
    return (at_main - before) / 1e6

def from_sh():
    return stamped(["/bin/sh", "-c", 'date +%s%N >&2; exec "$0" "$@"'])

def report(what, times):
    times = sorted(times)
    print(f"{what} -> first request: median {statistics.median(times):.2f} ms, "
          f"min {times[0]:.2f} ms, max {times[-1]:.2f} ms over {runs} runs")

one(argv)  # warm the page cache
measures = {"exec": [], "sh+date": [], "spawn": []}
floors = []
for _ in range(runs):
    measures["exec"].append(from_exec())
    measures["sh+date"].append(from_sh())
    measures["spawn"].append(one(argv))
    floors.append(floor())
for what, times in measures.items():
    report(what, times)
floors.sort()
print(f"floor (exec -> main of a minimal Rust program): median {statistics.median(floors):.2f} ms, "
      f"min {floors[0]:.2f} ms over {runs} runs")

if shutil.which("strace"):
    trace = os.path.join(work, "trace")
    one(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", trace] + argv)
    with open(trace) as f:
        lines = f.readlines()
    certs = [l for l in lines if "/etc/ssl" in l or "/certs" in l or "ca-certificates" in l]
    print(f"files opened in one run: {len(lines)}, of them in certificate stores: {len(certs)}")
PY
