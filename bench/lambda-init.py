#!/usr/bin/env python3
"""Cold-start init time of each Lambda function binary, measured locally.

Lambda's "Init Duration" is the time from starting the bootstrap process until the runtime
asks the Runtime API for its first event (`GET /2018-06-01/runtime/invocation/next`). This
script plays that API on 127.0.0.1: for every binary it starts a fresh process with the
environment Lambda gives a function (plus the function's own configuration), times the
interval from spawning it to its first `next` request, then stops it. No event is ever
handed out, so nothing reaches DynamoDB; an init error (`/runtime/init/error`) or an early
exit is reported as a failure.

    bench/lambda-init.py DIR [--runs N]

DIR holds one directory per function with its `bootstrap` in it (what `cargo lambda build`
writes under target/lambda/). Prints one row per function: median, p90 and max over the runs.
Standard library only.
"""

import argparse
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

NEXT = "/2018-06-01/runtime/invocation/next"
INIT_ERROR = "/2018-06-01/runtime/init/error"

# What the template gives the functions, with values that need no network at init.
FUNCTION_ENV = {
    "TH_TABLE": "a2a-tasks",
    "TH_BASE_URL": "https://example.execute-api.us-east-1.amazonaws.com/v1",
    "TH_AUTH_MODE": "none",
    "TH_RUNNER_FUNCTION": "a2a-runner",
    "TH_JWT_ISSUER": "https://issuer.example",
    "TH_JWT_AUDIENCE": "a2a",
    "TH_JWT_JWKS_URL": "https://issuer.example/.well-known/jwks.json",
}


class RuntimeApi(http.server.BaseHTTPRequestHandler):
    """The Runtime API's two calls an init can make; records when and which came first."""

    protocol_version = "HTTP/1.1"
    arrived = None  # (perf_counter_ns, path) of the first call, set per run
    init_error = None
    event = threading.Event()

    def do_GET(self):
        self._record()
        # The process is being stopped by now; the answer only has to not hang.
        self._answer(503)

    def do_POST(self):
        self._record()
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode("utf-8", "replace")
        RuntimeApi.init_error = body
        self._answer(202)

    def _answer(self, status):
        try:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the process was stopped first

    def _record(self):
        if RuntimeApi.arrived is None:
            RuntimeApi.arrived = (time.perf_counter_ns(), self.path.split("?")[0])
            RuntimeApi.event.set()

    def log_message(self, *_):
        pass


class RuntimeApiServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A process stopped after its first call resets its connection: expected, not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def measure(bootstrap, server, runs):
    """Init times in ms of `runs` fresh processes of `bootstrap`, or raises on a failed init."""
    host, port = server.server_address
    name = os.path.basename(os.path.dirname(bootstrap))
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_LAMBDA_RUNTIME_API": f"{host}:{port}",
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "local",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDLOCAL",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_SESSION_TOKEN": "local",
        "LAMBDA_TASK_ROOT": os.path.dirname(bootstrap),
        **FUNCTION_ENV,
    }
    times = []
    with tempfile.TemporaryFile() as log:
        for _ in range(runs):
            RuntimeApi.arrived = None
            RuntimeApi.init_error = None
            RuntimeApi.event.clear()
            start = time.perf_counter_ns()
            proc = subprocess.Popen(
                [bootstrap], env=env, cwd=os.path.dirname(bootstrap), stdout=log, stderr=log
            )
            try:
                while not RuntimeApi.event.wait(0.01):
                    if proc.poll() is not None or time.perf_counter_ns() - start > 10e9:
                        break
            finally:
                proc.kill()
                proc.wait()
            arrived = RuntimeApi.arrived
            if arrived is None or arrived[1] != NEXT:
                log.seek(0)
                output = log.read().decode("utf-8", "replace")[-2000:]
                raise RuntimeError(
                    f"{name}: no first `next` call ({arrived and arrived[1]}; "
                    f"init error: {RuntimeApi.init_error}); output:\n{output}"
                )
            times.append((arrived[0] - start) / 1e6)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="directory of <function>/bootstrap")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    # Each process starts in its own directory (as /var/task on Lambda): absolute paths.
    args.dir = os.path.abspath(args.dir)

    server = RuntimeApiServer(("127.0.0.1", 0), RuntimeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    functions = sorted(
        d for d in os.listdir(args.dir) if os.path.isfile(os.path.join(args.dir, d, "bootstrap"))
    )
    if not functions:
        sys.exit(f"no <function>/bootstrap under {args.dir}")
    print(f"{'function':<26} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}  ({args.runs} runs)")
    worst = 0.0
    for name in functions:
        times = sorted(measure(os.path.join(args.dir, name, "bootstrap"), server, args.runs))
        p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]
        worst = max(worst, statistics.median(times))
        print(f"{name:<26} {statistics.median(times):>10.2f} {p90:>8.2f} {times[-1]:>8.2f}")
    print(f"slowest median: {worst:.2f} ms")
    server.shutdown()


if __name__ == "__main__":
    main()
