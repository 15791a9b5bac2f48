#!/usr/bin/env python3
"""Unit tests of localstack/stream-poller.py's batch policy and filters (no I/O).

    python3 tests/lambda/stream_poller_test.py     (tests/lambda/run.sh runs it first)
"""

import importlib.util
import json
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("stream_poller", os.path.join(ROOT, "localstack", "stream-poller.py"))
poller = importlib.util.module_from_spec(spec)
spec.loader.exec_module(poller)

poller.log = lambda message: None  # quiet: the tests check what it does
CONFIG = dict(poller.mapping_from_template(os.path.join(ROOT, "infra", "template.yaml")))


def records(n, now=1_000.0):
    return [{"eventName": "INSERT", "dynamodb": {"SequenceNumber": f"{i:021}", "ApproximateCreationDateTime": now}}
            for i in range(1, n + 1)]


def seqs(batch):
    return [int(r["dynamodb"]["SequenceNumber"]) for r in batch]


class Run:
    """deliver() with scripted answers: each invocation pops the next (status, error, body)."""

    def __init__(self, answers, config=None, now=1_000.0):
        self.answers = list(answers)
        self.invoked = []
        self.failed = []
        self.sleeps = []
        self.config = dict(CONFIG, **(config or {}))
        self.now = now

    def invoke(self, batch):
        self.invoked.append(seqs(batch))
        return self.answers.pop(0) if self.answers else (200, None, "{}")

    def __call__(self, batch):
        poller.deliver(batch, self.config, self.invoke,
                       lambda b, c, n, r: self.failed.append((seqs(b), c, n)),
                       sleep=self.sleeps.append, now=lambda: self.now)
        return self


def partial(*ids):
    return 200, None, json.dumps({"batchItemFailures": [{"itemIdentifier": f"{i:021}"} for i in ids]})


ERROR = (200, "Unhandled", json.dumps({"errorType": "Panic", "errorMessage": "boom"}))


class DeliverTest(unittest.TestCase):
    def test_a_batch_answered_without_failures_is_sent_once(self):
        for answer in [(200, None, "{}"), (200, None, ""), (200, None, "null"),
                       (200, None, '{"batchItemFailures": []}')]:
            run = Run([answer])(records(3))
            self.assertEqual(run.invoked, [[1, 2, 3]])
            self.assertEqual(run.failed, [])

    def test_item_failures_retry_the_batch_from_the_earliest_record_named(self):
        run = Run([partial(4, 2), (200, None, "{}")])(records(5))
        self.assertEqual(run.invoked, [[1, 2, 3, 4, 5], [2, 3, 4, 5]])
        self.assertEqual(run.failed, [])
        self.assertEqual(run.sleeps, [1])

    def test_item_failures_naming_no_record_of_the_batch_fail_it_whole(self):
        run = Run([partial(9), (200, None, "{}"), (200, None, "{}")])(records(4))
        # a whole-batch failure: bisected, then the second half
        self.assertEqual(run.invoked, [[1, 2, 3, 4], [1, 2], [3, 4]])

    def test_a_function_error_bisects_the_batch(self):
        run = Run([ERROR, ERROR, (200, None, "{}"), (200, None, "{}"), (200, None, "{}")])(records(4))
        self.assertEqual(run.invoked, [[1, 2, 3, 4], [1, 2], [1], [2], [3, 4]])
        self.assertEqual(run.failed, [])

    def test_an_http_error_or_a_failed_invoke_is_a_function_error(self):
        for answer in [(500, None, "oops"), (0, "connection refused", "")]:
            run = Run([answer], {"bisect_on_error": False})(records(2))
            self.assertEqual(run.invoked, [[1, 2], [1, 2]])

    def test_without_bisect_the_whole_batch_is_retried(self):
        run = Run([ERROR, (200, None, "{}")], {"bisect_on_error": False})(records(3))
        self.assertEqual(run.invoked, [[1, 2, 3], [1, 2, 3]])

    def test_a_batch_failing_past_the_retries_goes_to_the_on_failure_destination(self):
        retries = CONFIG["maximum_retry_attempts"]
        run = Run([ERROR] * (retries + 1), {"bisect_on_error": False})(records(2))
        self.assertEqual(len(run.invoked), retries + 1)
        self.assertEqual(run.failed, [([1, 2], "RetryAttemptsExhausted", retries + 1)])
        self.assertEqual(run.sleeps[:4], [1, 2, 4, 8])
        self.assertTrue(all(s <= poller.MAX_BACKOFF for s in run.sleeps))

    def test_after_the_on_failure_destination_the_rest_is_delivered(self):
        retries = CONFIG["maximum_retry_attempts"]
        # bisected down to record 1, which always fails; 2 then succeeds
        run = Run([ERROR] * (retries + 1) + [(200, None, "{}")])(records(2))
        self.assertEqual(run.failed, [([1], "RetryAttemptsExhausted", retries + 1)])
        self.assertEqual(run.invoked[-1], [2])

    def test_ignored_item_failures_without_report_batch_item_failures(self):
        run = Run([partial(1)], {"report_batch_item_failures": False})(records(2))
        self.assertEqual(run.invoked, [[1, 2]])

    def test_records_past_the_maximum_age_go_to_the_on_failure_destination_unsent(self):
        run = Run([], now=1_000.0 + CONFIG["maximum_record_age_seconds"] + 1)(records(2))
        self.assertEqual(run.invoked, [])
        self.assertEqual(run.failed, [([1, 2], "RecordAgeExceeded", 0)])


class FilterTest(unittest.TestCase):
    def test_the_templates_filter_admits_inserts_only(self):
        self.assertEqual(CONFIG["filters"], [{"eventName": ["INSERT"]}])
        for name, admitted in [("INSERT", True), ("MODIFY", False), ("REMOVE", False)]:
            self.assertEqual(poller.admitted(CONFIG["filters"], {"eventName": name}), admitted)

    def test_nested_patterns_and_no_filter(self):
        pattern = [{"dynamodb": {"Keys": {"PK": {"S": ["TASK#1"]}}}}]
        self.assertTrue(poller.admitted(pattern, {"dynamodb": {"Keys": {"PK": {"S": "TASK#1"}}}}))
        self.assertFalse(poller.admitted(pattern, {"dynamodb": {"Keys": {"PK": {"S": "TASK#2"}}}}))
        self.assertTrue(poller.admitted([], {"eventName": "MODIFY"}))


class OnFailureRecordTest(unittest.TestCase):
    def test_the_record_names_the_batch_as_lambda_does(self):
        batch = records(3)
        record = poller.on_failure_record(batch, "RetryAttemptsExhausted", 11, "boom",
                                          "arn:fn", "arn:stream", "shard-1")
        info = record["DDBStreamBatchInfo"]
        self.assertEqual(record["requestContext"]["condition"], "RetryAttemptsExhausted")
        self.assertEqual(record["requestContext"]["approximateInvokeCount"], 11)
        self.assertEqual((info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]),
                         (f"{1:021}", f"{3:021}", 3))
        self.assertEqual((info["shardId"], info["streamArn"]), ("shard-1", "arn:stream"))


if __name__ == "__main__":
    unittest.main()
