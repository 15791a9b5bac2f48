#!/usr/bin/env python3
"""Cold-start init time of each Lambda function binary, measured locally.

Starts each binary (native release build, `cargo build --release -p functions --bins`)
against a stub of the Lambda runtime API on 127.0.0.1 and times the span from spawning the
process to its first `GET /2018-06-01/runtime/invocation/next`: everything the function does
before it asks for work (configuration, the SDK config, clients, the service). The stub then
holds that request open and the process is stopped. Each binary is started RUNS times; the
median and the maximum are printed, as a Markdown table.

    python3 bench/lambda-init.py [--runs 5] [--target target/release]
"""

import argparse
import http.server
import os
import socketserver
import statistics
import subprocess
import sys
import threading
import time

FUNCTIONS = [
    "jsonrpc", "agent-card", "send-message", "send-streaming-message", "task", "list-tasks",
    "create-push-config", "get-push-config", "list-push-configs", "delete-push-config",
    "get-extended-agent-card", "push-notifier", "runner", "sweeper", "authorizer",
]


class Stub(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.asked = threading.Event()
        self.asked_at = None


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/2018-06-01/runtime/invocation/next"):
            if not self.server.asked.is_set():
                self.server.asked_at = time.perf_counter()
                self.server.asked.set()
            time.sleep(5)  # hold it: the process is stopped before it gets work
        self.send_response(404)
        self.end_headers()

    def do_POST(self):  # init errors are reported here
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length).decode(errors="replace")
        print(f"  init error reported: {body}", file=sys.stderr)
        self.server.asked_at = None
        self.server.asked.set()
        self.send_response(202)
        self.end_headers()


def measure(binary, env):
    stub = Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    env = dict(env, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{stub.server_address[1]}")
    started = time.perf_counter()
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not stub.asked.wait(10) or stub.asked_at is None:
            return None
        return (stub.asked_at - started) * 1000
    finally:
        proc.kill()
        proc.wait()
        stub.shutdown()
        stub.server_close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", default="target/release")
    args = ap.parse_args()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "TABLE_NAME": "tasks",
        "BASE_URL": "https://example.execute-api.us-east-1.amazonaws.com/a2a",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "none",
        "AWS_SECRET_ACCESS_KEY": "none",
        "AWS_LAMBDA_FUNCTION_NAME": "init-bench",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/init-bench",
        "AWS_LAMBDA_LOG_STREAM_NAME": "local",
        "RUNNER_FUNCTION": "init-bench-runner",
        # The authorizer's configuration; its JWKS is fetched on the first token, not at init.
        "JWT_ISSUER": "https://issuer.example",
        "JWT_AUDIENCE": "a2a",
        "JWT_JWKS_URL": "https://issuer.example/jwks.json",
        "RUST_LOG": "warn",
    }
    print("| function | init, median (ms) | init, max (ms) |")
    print("|---|---:|---:|")
    for name in FUNCTIONS:
        binary = os.path.join(args.target, name)
        if not os.path.exists(binary):
            print(f"| `{name}` | not built | |")
            continue
        times = [measure(binary, env) for _ in range(args.runs)]
        if any(t is None for t in times):
            print(f"| `{name}` | failed to start | |")
            continue
        print(f"| `{name}` | {statistics.median(times):.1f} | {max(times):.1f} |")


if __name__ == "__main__":
    main()
