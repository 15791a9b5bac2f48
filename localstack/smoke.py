#!/usr/bin/env python3
"""DynamoDB emulator smoke check (standard library only).

Proves that the endpoint in AWS_ENDPOINT_URL_DYNAMODB does what the task
store's contract relies on: conditional writes, transactions with per-item
cancellation reasons and no partial writes, strongly consistent queries over a
sort key, atomic counters, and DynamoDB Streams (ListStreams, DescribeStream,
GetShardIterator, GetRecords) for push delivery.

Run it through one of the emulator wrappers, e.g.

    localstack/dynamodb-local.sh run -- python3 localstack/smoke.py
    localstack/localstack.sh     run -- python3 localstack/smoke.py

Environment: AWS_ENDPOINT_URL_DYNAMODB (required), AWS_ENDPOINT_URL_DYNAMODB_STREAMS
(defaults to the former), AWS_REGION (default us-east-1), AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY (default "test"). Requests are signed with SigV4.
It refuses non-loopback endpoints unless SMOKE_ALLOW_REMOTE=1.

Exit status: 0 when every check passed, 1 when any failed, 2 on a usage error.
"""

import datetime
import hashlib
import hmac
import http.client
import json
import os
import sys
import time
import urllib.parse
import uuid

TIMEOUT = 15.0


class DdbError(Exception):
    def __init__(self, status, body):
        self.status = status
        self.body = body if isinstance(body, dict) else {"raw": body}
        raw_type = self.body.get("__type", "")
        self.code = raw_type.rsplit("#", 1)[-1]
        self.message = self.body.get("message") or self.body.get("Message") or ""
        super().__init__(f"HTTP {status} {self.code}: {self.message}")


class Client:
    def __init__(self, endpoint, target_prefix, region, access_key, secret_key, token=None):
        url = urllib.parse.urlsplit(endpoint)
        if url.scheme not in ("http", "https"):
            raise SystemExit(f"smoke: unsupported endpoint {endpoint!r}")
        self.scheme = url.scheme
        self.host = url.netloc
        self.path = url.path or "/"
        self.target_prefix = target_prefix
        self.region = region
        self.access_key = access_key
        self.secret_key = secret_key
        self.token = token

    def _sign(self, headers, body):
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = now.strftime("%Y%m%d")
        headers["host"] = self.host
        headers["x-amz-date"] = amz_date
        if self.token:
            headers["x-amz-security-token"] = self.token
        names = sorted(h.lower() for h in headers)
        lower = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
        canonical_headers = "".join(f"{n}:{lower[n]}\n" for n in names)
        signed = ";".join(names)
        canonical = "\n".join(
            ["POST", self.path, "", canonical_headers, signed, hashlib.sha256(body).hexdigest()]
        )
        scope = f"{day}/{self.region}/dynamodb/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = ("AWS4" + self.secret_key).encode()
        for part in (day, self.region, "dynamodb", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={sig}"
        )

    def call(self, operation, payload):
        body = json.dumps(payload).encode()
        headers = {
            "content-type": "application/x-amz-json-1.0",
            "x-amz-target": f"{self.target_prefix}.{operation}",
        }
        self._sign(headers, body)
        conn_cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(self.host, timeout=TIMEOUT)
        try:
            conn.request("POST", self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            status = resp.status
        finally:
            conn.close()
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = data.decode(errors="replace")
        if status != 200:
            raise DdbError(status, parsed)
        return parsed


# What a check may raise that counts as its failure (anything else is a bug here).
CHECK_FAILURES = (
    AssertionError,
    DdbError,
    OSError,
    http.client.HTTPException,
    KeyError,
    TypeError,
    ValueError,
    IndexError,
)


def failure_reason(e):
    """The FAIL line's text for an exception in CHECK_FAILURES."""
    if isinstance(e, AssertionError):
        return str(e)
    if isinstance(e, DdbError):
        return f"unexpected {e}"
    if isinstance(e, (OSError, http.client.HTTPException)):
        return f"transport error {type(e).__name__}: {e}"
    return f"unexpected response shape ({type(e).__name__}: {e})"


class Smoke:
    def __init__(self, ddb, streams):
        self.ddb = ddb
        self.streams = streams
        self.passed = 0
        self.failed = []
        self.table = f"smoke-{uuid.uuid4().hex[:12]}"

    def check(self, name, fn):
        t0 = time.monotonic()
        try:
            detail = fn()
        except CHECK_FAILURES as e:
            self.failed.append(name)
            print(f"FAIL {name}: {failure_reason(e)}", flush=True)
            return
        self.passed += 1
        ms = (time.monotonic() - t0) * 1000
        print(f"ok   {name} ({ms:.0f} ms){': ' + detail if detail else ''}", flush=True)

    def expect_error(self, code, operation, payload):
        try:
            self.ddb.call(operation, payload)
        except DdbError as e:
            assert e.code == code, f"expected {code}, got HTTP {e.status} {e.code}: {e.message}"
            return e
        raise AssertionError(f"{operation} succeeded; expected {code}")

    def new_event(self, seq, kind):
        """A put of task#1's event #SEQ that fails if it already exists (PutItem or a transaction's Put)."""
        return {
            "TableName": self.table,
            "Item": {"pk": {"S": "task#1"}, "sk": {"S": f"event#{seq:04d}"}, "kind": {"S": kind}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }

    # --- checks -----------------------------------------------------------

    def create_table(self):
        self.ddb.call(
            "CreateTable",
            {
                "TableName": self.table,
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "BillingMode": "PAY_PER_REQUEST",
                "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            },
        )
        deadline = time.monotonic() + 30
        while True:
            t = self.ddb.call("DescribeTable", {"TableName": self.table})["Table"]
            if t["TableStatus"] == "ACTIVE":
                return "ACTIVE"
            assert time.monotonic() < deadline, f"table still {t['TableStatus']} after 30 s"
            time.sleep(0.2)

    def describe_table(self):
        t = self.ddb.call("DescribeTable", {"TableName": self.table})["Table"]
        keys = {k["AttributeName"]: k["KeyType"] for k in t["KeySchema"]}
        assert keys == {"pk": "HASH", "sk": "RANGE"}, f"KeySchema {t['KeySchema']}"
        spec = t.get("StreamSpecification") or {}
        assert spec.get("StreamEnabled") is True, f"StreamSpecification {spec}"
        assert spec.get("StreamViewType") == "NEW_AND_OLD_IMAGES", f"StreamSpecification {spec}"
        assert t.get("LatestStreamArn"), "no LatestStreamArn"
        self.stream_arn = t["LatestStreamArn"]
        return f"LatestStreamArn={self.stream_arn}"

    def put_if_absent(self):
        self.ddb.call(
            "PutItem",
            {
                "TableName": self.table,
                "Item": {"pk": {"S": "task#1"}, "sk": {"S": "meta"}, "ver": {"N": "1"}, "state": {"S": "submitted"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            },
        )

    def put_if_absent_again_fails(self):
        e = self.expect_error(
            "ConditionalCheckFailedException",
            "PutItem",
            {
                "TableName": self.table,
                "Item": {"pk": {"S": "task#1"}, "sk": {"S": "meta"}, "ver": {"N": "99"}},
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        )
        item = e.body.get("Item")
        assert item and item.get("ver") == {"N": "1"}, f"ALL_OLD item missing or wrong: {e.body}"
        got = self.ddb.call(
            "GetItem", {"TableName": self.table, "Key": {"pk": {"S": "task#1"}, "sk": {"S": "meta"}}, "ConsistentRead": True}
        )["Item"]
        assert got["ver"] == {"N": "1"}, f"item was overwritten: {got}"
        return "ConditionalCheckFailedException with ALL_OLD item; original kept"

    def versioned_update(self):
        key = {"pk": {"S": "task#1"}, "sk": {"S": "meta"}}
        r = self.ddb.call(
            "UpdateItem",
            {
                "TableName": self.table,
                "Key": key,
                "UpdateExpression": "SET ver = :new, #s = :st, lease_owner = :o",
                "ConditionExpression": "ver = :old AND attribute_not_exists(lease_owner)",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":new": {"N": "2"}, ":old": {"N": "1"}, ":st": {"S": "working"}, ":o": {"S": "runner-a"}},
                "ReturnValues": "ALL_NEW",
            },
        )
        assert r["Attributes"]["ver"] == {"N": "2"}, r
        self.expect_error(
            "ConditionalCheckFailedException",
            "UpdateItem",
            {
                "TableName": self.table,
                "Key": key,
                "UpdateExpression": "SET ver = :new, lease_owner = :o",
                "ConditionExpression": "ver = :old AND attribute_not_exists(lease_owner)",
                "ExpressionAttributeValues": {":new": {"N": "2"}, ":old": {"N": "1"}, ":o": {"S": "runner-b"}},
            },
        )
        return "lease taken at ver 1->2; stale ver / held lease -> ConditionalCheckFailedException"

    def atomic_counter(self):
        key = {"pk": {"S": "task#1"}, "sk": {"S": "counter"}}
        seen = []
        for _ in range(3):
            r = self.ddb.call(
                "UpdateItem",
                {
                    "TableName": self.table,
                    "Key": key,
                    "UpdateExpression": "ADD seq :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                    "ReturnValues": "UPDATED_NEW",
                },
            )
            seen.append(int(r["Attributes"]["seq"]["N"]))
        assert seen == [1, 2, 3], seen
        return f"ADD returned {seen}"

    def transaction_cancelled(self):
        e = self.expect_error(
            "TransactionCanceledException",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": self.new_event(1, "status")},
                    {
                        "ConditionCheck": {
                            "TableName": self.table,
                            "Key": {"pk": {"S": "task#1"}, "sk": {"S": "meta"}},
                            "ConditionExpression": "ver = :v",
                            "ExpressionAttributeValues": {":v": {"N": "1"}},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": {"S": "task#2"}, "sk": {"S": "meta"}},
                            "UpdateExpression": "SET ver = :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    },
                ]
            },
        )
        reasons = e.body.get("CancellationReasons")
        assert isinstance(reasons, list) and len(reasons) == 3, f"CancellationReasons: {e.body}"
        codes = [r.get("Code") for r in reasons]
        assert codes == ["None", "ConditionalCheckFailed", "None"], f"reason codes {codes}"
        old = reasons[1].get("Item")
        assert old and old.get("ver") == {"N": "2"}, f"ALL_OLD item in reason: {reasons[1]}"
        for key in ({"pk": {"S": "task#1"}, "sk": {"S": "event#0001"}}, {"pk": {"S": "task#2"}, "sk": {"S": "meta"}}):
            got = self.ddb.call("GetItem", {"TableName": self.table, "Key": key, "ConsistentRead": True})
            assert "Item" not in got, f"partial write visible: {got}"
        return f"reasons {codes}, old item returned, no partial write"

    def transaction_commits(self):
        self.ddb.call(
            "TransactWriteItems",
            {
                "ClientRequestToken": uuid.uuid4().hex,
                "TransactItems": [
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": {"S": "task#1"}, "sk": {"S": "meta"}},
                            "UpdateExpression": "SET ver = :new, #s = :st REMOVE lease_owner",
                            "ConditionExpression": "ver = :old AND lease_owner = :o",
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": {
                                ":new": {"N": "3"},
                                ":old": {"N": "2"},
                                ":o": {"S": "runner-a"},
                                ":st": {"S": "completed"},
                            },
                        }
                    },
                    {"Put": self.new_event(1, "status")},
                    {"Put": self.new_event(2, "artifact")},
                ],
            },
        )
        got = self.ddb.call(
            "GetItem", {"TableName": self.table, "Key": {"pk": {"S": "task#1"}, "sk": {"S": "meta"}}, "ConsistentRead": True}
        )["Item"]
        assert got["ver"] == {"N": "3"} and "lease_owner" not in got and got["state"] == {"S": "completed"}, got
        return "3 writes committed atomically"

    def transaction_same_item_twice(self):
        key = {"pk": {"S": "task#3"}, "sk": {"S": "meta"}}
        self.expect_error(
            "ValidationException",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": self.table, "Item": {**key, "a": {"S": "1"}}}},
                    {"Delete": {"TableName": self.table, "Key": key}},
                ]
            },
        )
        return "ValidationException"

    def conditional_delete(self):
        key = {"pk": {"S": "task#1"}, "sk": {"S": "event#0002"}}
        self.expect_error(
            "ConditionalCheckFailedException",
            "DeleteItem",
            {"TableName": self.table, "Key": key, "ConditionExpression": "kind = :k", "ExpressionAttributeValues": {":k": {"S": "status"}}},
        )
        r = self.ddb.call(
            "DeleteItem",
            {
                "TableName": self.table,
                "Key": key,
                "ConditionExpression": "kind = :k",
                "ExpressionAttributeValues": {":k": {"S": "artifact"}},
                "ReturnValues": "ALL_OLD",
            },
        )
        assert r["Attributes"]["kind"] == {"S": "artifact"}, r

    def query_log(self):
        for i in range(2, 8):
            self.ddb.call("PutItem", self.new_event(i, "msg"))
        base = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :e)",
            "ExpressionAttributeValues": {":p": {"S": "task#1"}, ":e": {"S": "event#"}},
            "ConsistentRead": True,
            "Limit": 3,
        }
        sks, start, pages = [], None, 0
        while True:
            req = dict(base)
            if start:
                req["ExclusiveStartKey"] = start
            r = self.ddb.call("Query", req)
            pages += 1
            sks += [it["sk"]["S"] for it in r["Items"]]
            start = r.get("LastEvaluatedKey")
            if not start:
                break
            assert pages < 10, "pagination does not terminate"
        want = [f"event#{i:04d}" for i in range(1, 8)]
        assert sks == want, f"ascending query got {sks}"
        r = self.ddb.call("Query", {**base, "Limit": 2, "ScanIndexForward": False})
        got = [it["sk"]["S"] for it in r["Items"]]
        assert got == ["event#0007", "event#0006"], f"descending got {got}"
        return f"{len(sks)} events over {pages} pages; descending ok"

    def check_streams(self):
        listed = self.streams.call("ListStreams", {"TableName": self.table})
        arns = [s["StreamArn"] for s in listed.get("Streams", [])]
        assert arns, f"ListStreams returned no stream: {listed}"
        arn = arns[0]
        desc = self.streams.call("DescribeStream", {"StreamArn": arn})["StreamDescription"]
        assert desc.get("StreamStatus") == "ENABLED", f"StreamStatus {desc.get('StreamStatus')}"
        assert desc.get("StreamViewType") == "NEW_AND_OLD_IMAGES", desc.get("StreamViewType")
        shards = desc.get("Shards") or []
        assert shards, f"no shards: {desc}"
        records = []
        deadline = time.monotonic() + 10
        # every successful write above, and nothing else: task#1/meta INSERT + 2 MODIFY,
        # counter INSERT + 2 MODIFY, event#0001/0002 INSERT (transaction), event#0002
        # REMOVE, event#0002..0007 INSERT (query_log)
        want = 3 + 3 + 2 + 1 + 6
        while True:
            records = []
            for shard in shards:
                it = self.streams.call(
                    "GetShardIterator", {"StreamArn": arn, "ShardId": shard["ShardId"], "ShardIteratorType": "TRIM_HORIZON"}
                )["ShardIterator"]
                for _ in range(50):
                    if not it:
                        break
                    r = self.streams.call("GetRecords", {"ShardIterator": it, "Limit": 100})
                    records += r.get("Records", [])
                    if not r.get("Records"):
                        break
                    it = r.get("NextShardIterator")
            if len(records) >= want or time.monotonic() > deadline:
                break
            time.sleep(0.5)
            desc = self.streams.call("DescribeStream", {"StreamArn": arn})["StreamDescription"]
            shards = desc.get("Shards") or shards
        names = [r["eventName"] for r in records]
        keys = [(r["dynamodb"]["Keys"]["pk"]["S"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in records]
        assert len(records) == want, f"expected {want} stream records, got {len(records)}: {list(zip(names, keys))}"
        assert ("task#2", "meta") not in keys, "a cancelled transaction produced a stream record"
        meta = [r for r in records if r["dynamodb"]["Keys"]["sk"]["S"] == "meta"]
        assert [r["eventName"] for r in meta] == ["INSERT", "MODIFY", "MODIFY"], [r["eventName"] for r in meta]
        last = meta[-1]["dynamodb"]
        assert last["NewImage"]["ver"] == {"N": "3"} and last["OldImage"]["ver"] == {"N": "2"}, last
        seqs = [int(r["dynamodb"]["SequenceNumber"]) for r in meta]
        assert seqs == sorted(seqs), f"sequence numbers not increasing: {seqs}"
        return (
            f"{len(shards)} shard(s), {len(records)} records "
            f"(INSERT {names.count('INSERT')}, MODIFY {names.count('MODIFY')}, REMOVE {names.count('REMOVE')}), "
            "old/new images, none from the cancelled transaction"
        )

    def delete_table(self):
        self.ddb.call("DeleteTable", {"TableName": self.table})

    def run(self):
        print(f"smoke: endpoint {self.ddb.scheme}://{self.ddb.host}, table {self.table}", flush=True)
        t0 = time.monotonic()
        self.check("CreateTable with StreamSpecification -> ACTIVE", self.create_table)
        if self.failed:
            return self.summary(t0)
        try:
            self.check("DescribeTable: key schema, stream spec, LatestStreamArn", self.describe_table)
            self.check("PutItem attribute_not_exists (first) succeeds", self.put_if_absent)
            self.check("PutItem attribute_not_exists (second) fails", self.put_if_absent_again_fails)
            self.check("UpdateItem version check / lease", self.versioned_update)
            self.check("UpdateItem ADD counter", self.atomic_counter)
            self.check("TransactWriteItems cancelled: reasons, no partial write", self.transaction_cancelled)
            self.check("TransactWriteItems commits", self.transaction_commits)
            self.check("TransactWriteItems same item twice -> ValidationException", self.transaction_same_item_twice)
            self.check("DeleteItem with condition", self.conditional_delete)
            self.check("Query begins_with, ConsistentRead, pagination, descending", self.query_log)
            self.check("DynamoDB Streams: ListStreams/DescribeStream/GetRecords", self.check_streams)
        finally:
            self.check("DeleteTable", self.delete_table)
        return self.summary(t0)

    def summary(self, t0):
        total = self.passed + len(self.failed)
        secs = time.monotonic() - t0
        if self.failed:
            print(f"smoke: {len(self.failed)} of {total} checks FAILED in {secs:.2f} s: {', '.join(self.failed)}", flush=True)
            return 1
        print(f"smoke: all {total} checks passed in {secs:.2f} s", flush=True)
        return 0


def main():
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    if not endpoint:
        print("smoke: AWS_ENDPOINT_URL_DYNAMODB is not set (run me via localstack/dynamodb-local.sh run -- ...)", file=sys.stderr)
        return 2
    streams_endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB_STREAMS") or endpoint
    for url in (endpoint, streams_endpoint):
        host = urllib.parse.urlsplit(url).hostname or ""
        if host not in ("127.0.0.1", "localhost", "::1") and os.environ.get("SMOKE_ALLOW_REMOTE") != "1":
            print(f"smoke: refusing non-loopback endpoint {url} (set SMOKE_ALLOW_REMOTE=1 to allow)", file=sys.stderr)
            return 2
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    ak = os.environ.get("AWS_ACCESS_KEY_ID") or "test"
    sk = os.environ.get("AWS_SECRET_ACCESS_KEY") or "test"
    token = os.environ.get("AWS_SESSION_TOKEN")
    ddb = Client(endpoint, "DynamoDB_20120810", region, ak, sk, token)
    streams = Client(streams_endpoint, "DynamoDBStreams_20120810", region, ak, sk, token)
    return Smoke(ddb, streams).run()


if __name__ == "__main__":
    sys.exit(main())
