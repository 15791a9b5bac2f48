#!/usr/bin/env python3
"""A local event source mapping for the task table's stream (Python 3 standard library only).

Deployed, Lambda polls the table's DynamoDB Stream and invokes the push notifier with batches of
records, as infra/template.yaml's `Type: DynamoDB` event configures. Under `cargo lambda watch`
nothing does, so this program does it against DynamoDB Local:

    localstack/stream-poller.py [--table tiny-harness-local] [--invoke-url http://127.0.0.1:9000]

It reads the mapping's settings from the template (the function's binary, StartingPosition,
BatchSize, MaximumBatchingWindowInSeconds, FilterCriteria, FunctionResponseTypes,
BisectBatchOnFunctionError, MaximumRetryAttempts, MaximumRecordAgeInSeconds, the OnFailure
destination); `--print-config` prints them as JSON and exits. Then it waits for the table and its
stream, follows the stream's shards (a child shard once its parent is read to its end), reads
each shard with GetShardIterator/GetRecords, and invokes the function through the emulator's
Lambda API (`POST <invoke-url>/2015-03-31/functions/<name>/invocations`) with the DynamoDB Streams
event Lambda sends (`Records[]` as GetRecords returns them, plus `eventSourceARN`):

- a batch is sent when it holds BatchSize records, when the batching window has passed since
  its first record, or when its shard has ended; records the filter does not match are dropped;
- a partial batch response (`batchItemFailures`, with ReportBatchItemFailures) retries the batch
  from the earliest record it names; a response naming no record of the batch, or a function
  error, fails the whole batch, which bisect-on-error halves before the retry;
- a batch still failing after MaximumRetryAttempts retries (each after a backoff: 1 s, doubling,
  at most 30 s), or with records older than MaximumRecordAgeInSeconds, is logged as the
  on-failure destination would receive it (`stream-poller: on-failure ...` and the JSON of
  Lambda's invocation record), and the shard moves past it.

Each shard is read by its own thread, one batch at a time, so a shard's records are delivered in
order. The requests to DynamoDB Local carry an unverified SigV4-shaped Authorization header, as
DynamoDB Local requires one but does not check it. Stop it with SIGTERM or Ctrl-C.
"""

import argparse
import datetime
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLL_INTERVAL = 0.25  # Lambda polls a shard four times a second
DISCOVERY_INTERVAL = 1.0  # how often the shard list (and the table's stream) is read again
MAX_BACKOFF = 30.0


def log(message):
    print(f"stream-poller: {message}", file=sys.stderr, flush=True)


# --- the mapping's settings, from the template -------------------------------------------------


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _scalar(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def mapping_from_template(path):
    """The settings of the template's one DynamoDB event source, with Lambda's defaults.

    A reader for the few lines it needs (the standard library has no YAML parser): the
    `Type: DynamoDB` event, its `Properties` block and the function resource around it.
    functions/tests/template.rs checks what it reads against a real YAML parse.
    """
    lines = open(path, encoding="utf-8").read().splitlines()
    found = [i for i, line in enumerate(lines) if line.strip() == "Type: DynamoDB"]
    if len(found) != 1:
        raise SystemExit(f"stream-poller: {path}: expected one `Type: DynamoDB` event, found {len(found)}")
    at = found[0]
    # The event's block: what follows `Type: DynamoDB` at its indent or deeper.
    event = []
    for line in lines[at + 1:]:
        if line.strip() and not line.lstrip().startswith("#") and _indent(line) < _indent(lines[at]):
            break
        event.append(line)
    # The function resource: the nearest key at the resources' indent above it.
    start = at
    while start > 0 and not (_indent(lines[start]) == 2 and re.match(r"^  \w+:\s*$", lines[start])):
        start -= 1
    resource = []
    for line in lines[start + 1:]:
        if line.strip() and not line.lstrip().startswith("#") and _indent(line) <= 2:
            break
        resource.append(line)

    def values(block, key):
        pattern = re.compile(rf"^\s*(?:- )?{key}:\s*(.*?)\s*$")
        return [_scalar(m.group(1)) for m in map(pattern.match, block) if m and not m.group(1).startswith("#")]

    def one(block, key, default=None):
        found = values(block, key)
        if not found:
            if default is None:
                raise SystemExit(f"stream-poller: {path}: the DynamoDB event has no {key}")
            return default
        return found[0]

    response_types = one(event, "FunctionResponseTypes", "[]").strip("[]")
    on_failure = [line for line in event if line.strip().startswith("Destination:")]
    # The function's Timeout, else the Globals' (what bounds an invocation).
    timeout = values(resource, "Timeout") or values(lines, "Timeout")
    return {
        "resource": lines[start].strip().rstrip(":"),
        "function": one(resource, "Binary"),
        "timeout_seconds": int(timeout[0]) if timeout else 3,
        "starting_position": one(event, "StartingPosition"),
        "batch_size": int(one(event, "BatchSize", "100")),
        "batching_window_seconds": float(one(event, "MaximumBatchingWindowInSeconds", "0")),
        "report_batch_item_failures": "ReportBatchItemFailures"
        in [t.strip() for t in response_types.split(",")],
        "bisect_on_error": one(event, "BisectBatchOnFunctionError", "false").lower() == "true",
        "maximum_retry_attempts": int(one(event, "MaximumRetryAttempts", "-1")),
        "maximum_record_age_seconds": int(one(event, "MaximumRecordAgeInSeconds", "-1")),
        "filters": [json.loads(p) for p in values(event, "Pattern")],
        "on_failure": on_failure[0].split(":", 1)[1].strip() if on_failure else None,
    }


# --- filters -------------------------------------------------------------------------------------


def matches(pattern, value):
    """Lambda's event filtering for the exact-value patterns the template uses."""
    if not isinstance(value, dict):
        return False
    for key, want in pattern.items():
        if isinstance(want, dict):
            if not matches(want, value.get(key)):
                return False
        elif isinstance(want, list):
            if any(isinstance(w, (dict, list)) for w in want):
                raise SystemExit(f"stream-poller: unsupported filter operator in {pattern}")
            if key not in value or value[key] not in want:
                return False
        else:
            raise SystemExit(f"stream-poller: a filter's values must be a list: {pattern}")
    return True


def admitted(filters, record):
    return not filters or any(matches(f, record) for f in filters)


# --- the retry policy of one batch (no I/O: the caller gives `invoke` and `on_failure`) ----------


def outcome_of(status, function_error, body):
    """('ok', None) | ('partial', [ids]) | ('error', reason) for one invocation's answer."""
    if function_error or not 200 <= status < 300:
        return "error", f"status {status}" + (f", {function_error}" if function_error else "")
    try:
        answer = json.loads(body) if body and body.strip() else None
    except ValueError:
        answer = None
    if isinstance(answer, dict) and "errorType" in answer and "errorMessage" in answer:
        return "error", f"{answer['errorType']}: {answer['errorMessage']}"
    failures = answer.get("batchItemFailures") if isinstance(answer, dict) else None
    if not failures:
        return "ok", None
    return "partial", [f.get("itemIdentifier") if isinstance(f, dict) else None for f in failures]


def deliver(records, config, invoke, on_failure, sleep=time.sleep, now=time.time):
    """Delivers `records` (one shard's, in order) as Lambda's mapping would, batch by batch.

    `invoke(batch)` returns (status, function_error, body); `on_failure(batch, condition,
    invocations, reason)` receives what goes to the on-failure destination.
    """
    remaining = list(records)
    # The sizes of the batches still to send, in order: bisecting splits the first in two.
    sizes = [len(remaining)] if remaining else []
    invocations = 0
    while sizes:
        batch = remaining[:sizes[0]]
        max_age = config["maximum_record_age_seconds"]
        if max_age >= 0:
            old = [r for r in batch if now() - r["dynamodb"].get("ApproximateCreationDateTime", now()) > max_age]
            if old:
                on_failure(old, "RecordAgeExceeded", invocations, "older than MaximumRecordAgeInSeconds")
                remaining = [r for r in remaining if r not in old]
                sizes[0] -= len(old)
                if not sizes[0]:
                    sizes.pop(0)
                continue
        invocations += 1
        status, function_error, body = invoke(batch)
        kind, detail = outcome_of(status, function_error, body)
        if kind == "partial" and not config["report_batch_item_failures"]:
            kind = "ok"
        if kind == "partial":
            sequence = [r["dynamodb"]["SequenceNumber"] for r in batch]
            if all(d in sequence for d in detail):
                # Retry from the earliest record named: the ones before it are done.
                first = min(sequence.index(d) for d in detail)
                log(f"batch of {len(batch)}: {len(detail)} item failure(s); retrying from record {first}")
                remaining = remaining[first:]
                sizes[0] -= first
            else:
                kind, detail = "error", f"batchItemFailures names no record of the batch: {detail}"
        if kind == "ok":
            remaining = remaining[len(batch):]
            sizes.pop(0)
            invocations = 0
            continue
        if kind == "error":
            log(f"batch of {len(batch)} failed: {detail}")
        retries = config["maximum_retry_attempts"]
        if 0 <= retries < invocations:
            failed = remaining[:sizes.pop(0)]
            on_failure(failed, "RetryAttemptsExhausted", invocations, detail)
            remaining = remaining[len(failed):]
            invocations = 0
            continue
        if kind == "error" and config["bisect_on_error"] and len(batch) > 1:
            half = len(batch) // 2
            sizes[0:1] = [half, len(batch) - half]
        sleep(min(2 ** (invocations - 1), MAX_BACKOFF))


def on_failure_record(batch, condition, invocations, reason, function_arn, stream_arn, shard_id):
    """The invocation record Lambda sends a stream mapping's on-failure destination."""
    def arrival(record):
        seconds = record["dynamodb"].get("ApproximateCreationDateTime", 0)
        return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat()
    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invocations,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": arrival(batch[0]),
            "approximateArrivalOfLastRecord": arrival(batch[-1]),
            "batchSize": len(batch),
            "streamArn": stream_arn,
        },
        "reason": reason,
    }


# --- DynamoDB Local and the emulator --------------------------------------------------------------


class AwsError(Exception):
    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class Aws:
    def __init__(self, endpoint, region):
        self.endpoint = endpoint.rstrip("/") + "/"
        key = os.environ.get("AWS_ACCESS_KEY_ID", "local")
        day = time.strftime("%Y%m%d", time.gmtime())
        self.authorization = (
            f"AWS4-HMAC-SHA256 Credential={key}/{day}/{region}/dynamodb/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-target, Signature=" + "0" * 64
        )

    def call(self, target, body):
        request = urllib.request.Request(
            self.endpoint,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/x-amz-json-1.0",
                "X-Amz-Target": target,
                "Authorization": self.authorization,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)
        except urllib.error.HTTPError as err:
            text = err.read().decode(errors="replace")
            try:
                answer = json.loads(text)
            except ValueError:
                answer = {}
            kind = str(answer.get("__type", f"HTTP{err.code}")).rsplit("#", 1)[-1]
            raise AwsError(kind, answer.get("message") or answer.get("Message") or text) from None

    def dynamodb(self, operation, body):
        return self.call(f"DynamoDB_20120810.{operation}", body)

    def streams(self, operation, body):
        return self.call(f"DynamoDBStreams_20120810.{operation}", body)


class Mapping:
    def __init__(self, args, config):
        self.args = args
        self.config = config
        self.aws = Aws(args.endpoint, args.region)
        self.function_arn = f"arn:aws:lambda:{args.region}:000000000000:function:{config['function']}"
        self.lock = threading.Lock()
        self.finished = set()  # shards read to their end
        self.started = set()

    def stream_arn(self):
        """The table's stream, once the table exists with one."""
        waiting = False
        while True:
            try:
                table = self.aws.dynamodb("DescribeTable", {"TableName": self.args.table})["Table"]
                arn = table.get("LatestStreamArn")
                if arn and table.get("StreamSpecification", {}).get("StreamEnabled", True):
                    return arn
                reason = "has no stream"
            except AwsError as err:
                reason = "does not exist" if err.kind == "ResourceNotFoundException" else str(err)
            except OSError as err:
                reason = f"cannot be read ({err})"
            if not waiting:
                log(f"waiting for table {self.args.table} (it {reason})")
                waiting = True
            time.sleep(DISCOVERY_INTERVAL)

    def shards(self, arn):
        shards, start = [], None
        while True:
            body = {"StreamArn": arn}
            if start:
                body["ExclusiveStartShardId"] = start
            description = self.aws.streams("DescribeStream", body)["StreamDescription"]
            shards += description.get("Shards", [])
            start = description.get("LastEvaluatedShardId")
            if not start:
                return shards

    def run(self):
        arn = self.stream_arn()
        log(f"polling {arn} for {self.config['function']} (batch size {self.config['batch_size']}, "
            f"window {self.config['batching_window_seconds']} s)")
        while True:
            try:
                listed = self.shards(arn)
            except (AwsError, OSError) as err:
                log(f"cannot list the stream's shards: {err}; the table's stream is looked up again")
                arn = self.stream_arn()
                continue
            ids = {s["ShardId"] for s in listed}
            for shard in listed:
                shard_id, parent = shard["ShardId"], shard.get("ParentShardId")
                with self.lock:
                    ready = parent is None or parent in self.finished or parent not in ids
                    if shard_id in self.started or not ready:
                        continue
                    self.started.add(shard_id)
                threading.Thread(target=self.read_shard, args=(arn, shard_id), daemon=True).start()
            time.sleep(DISCOVERY_INTERVAL)

    def iterator(self, arn, shard_id, after):
        body = {"StreamArn": arn, "ShardId": shard_id}
        if after:
            body.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after)
        else:
            body["ShardIteratorType"] = self.config["starting_position"]
        return self.aws.streams("GetShardIterator", body)["ShardIterator"]

    def read_shard(self, arn, shard_id):
        try:
            self.read(arn, shard_id)
        except Exception as err:  # a thread's end must be seen; the shard is read again
            log(f"shard {shard_id}: stopped: {err!r}; it is read again from its start")
            with self.lock:
                self.started.discard(shard_id)

    def read(self, arn, shard_id):
        window = self.config["batching_window_seconds"]
        size = self.config["batch_size"]
        last_read = None
        shard_iterator = self.iterator(arn, shard_id, None)
        pending, first_at = [], None
        while shard_iterator or pending:
            got = 0
            if shard_iterator and len(pending) < size:
                try:
                    answer = self.aws.streams("GetRecords", {"ShardIterator": shard_iterator, "Limit": 1000})
                except AwsError as err:
                    if err.kind in ("ExpiredIteratorException", "TrimmedDataAccessException"):
                        shard_iterator = self.iterator(arn, shard_id, last_read if err.kind.startswith("Expired") else None)
                        continue
                    raise
                shard_iterator = answer.get("NextShardIterator")
                for record in answer.get("Records", []):
                    got += 1
                    last_read = record["dynamodb"]["SequenceNumber"]
                    if admitted(self.config["filters"], record):
                        pending.append(dict(record, eventSourceARN=arn))
                        first_at = first_at or time.monotonic()
            due = pending and (
                len(pending) >= size or not shard_iterator or time.monotonic() - first_at >= window
            )
            if due:
                batch, pending = pending[:size], pending[size:]
                first_at = time.monotonic() if pending else None
                deliver(batch, self.config, self.invoke,
                        lambda b, c, n, r: self.on_failure(b, c, n, r, arn, shard_id))
            elif not got:
                time.sleep(POLL_INTERVAL)
        log(f"shard {shard_id} ended")
        with self.lock:
            self.finished.add(shard_id)

    def invoke(self, batch):
        url = f"{self.args.invoke_url.rstrip('/')}/2015-03-31/functions/{self.config['function']}/invocations"
        request = urllib.request.Request(
            url, data=json.dumps({"Records": batch}).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.config["timeout_seconds"] + 60) as response:
                return response.status, response.headers.get("X-Amz-Function-Error"), response.read().decode(errors="replace")
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("X-Amz-Function-Error"), err.read().decode(errors="replace")
        except OSError as err:
            return 0, f"the invoke failed: {err}", ""

    def on_failure(self, batch, condition, invocations, reason, arn, shard_id):
        record = on_failure_record(batch, condition, invocations, reason, self.function_arn, arn, shard_id)
        log(f"on-failure ({self.config['on_failure']}): {json.dumps(record)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", default=os.path.join(ROOT, "infra", "template.yaml"))
    parser.add_argument("--table", default="tiny-harness-local")
    parser.add_argument("--endpoint", default=os.environ.get(
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", os.environ.get("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")))
    parser.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    parser.add_argument("--invoke-url", default="http://127.0.0.1:9000",
                        help="the emulator's Lambda API (cargo lambda watch)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the mapping's settings read from the template, and exit")
    args = parser.parse_args()
    config = mapping_from_template(args.template)
    if args.print_config:
        print(json.dumps(config, indent=2))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        Mapping(args, config).run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
