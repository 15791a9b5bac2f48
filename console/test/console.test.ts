// Unit tests of the console's logic that needs no browser (node --test, bundled by esbuild).

import assert from "node:assert/strict";
import { test } from "node:test";
import { actionMessage, a2uiMessages } from "../src/a2ui-messages";
import { helpRequest, serviceBase } from "../src/api";
import { newTaskEnvelope } from "../src/pages/new";
import { layers } from "../src/plan";
import { SseFrames } from "../src/sse";
import { StreamedText } from "../src/streamed";

test("SSE frames skip comments, read CR LF and split chunks", () => {
  const frames = new SseFrames();
  assert.deepEqual(frames.push(': keep-alive\r\n\r\ndata: {"a":'), []);
  assert.deepEqual(frames.push('1}\r\n\r\ndata: {"b":2}\n\ndata: 3'), ['{"a":1}', '{"b":2}']);
  assert.deepEqual(frames.finish(), ["3"]);
});

const chunk = (id: string, text: string, append: boolean, lastChunk = false) => ({
  artifact: { artifactId: id, name: "streamed-text", parts: [{ text }] },
  append,
  lastChunk,
});

test("streamed text is typed chunk by chunk and replaced by the final message", () => {
  const typed = new StreamedText();
  assert.equal(typed.apply(chunk("stream:m-1", "Order ", false)), true);
  typed.apply(chunk("stream:m-1", "48213 is ", true));
  typed.apply(chunk("stream:m-1", "refunded.", true, true));
  assert.deepEqual(typed.current(), ["Order 48213 is refunded."]);
  // A first chunk (append: false) starts the artifact again.
  typed.apply(chunk("stream:m-1", "Again", false));
  assert.deepEqual(typed.current(), ["Again"]);
  // Other artifacts are not streamed text.
  assert.equal(typed.apply({ artifact: { artifactId: "a2ui", name: "a2ui", parts: [] } }), false);
  assert.equal(typed.apply({ ...chunk("x", "no", false) }), false);
  typed.clear();
  assert.deepEqual(typed.current(), []);
});

test("plan steps are layered by their dependencies", () => {
  const placed = layers([
    { id: "a", name: "A" },
    { id: "b", name: "B", depends_on: ["a"] },
    { id: "c", name: "C", depends_on: ["a"] },
    { id: "d", name: "D", depends_on: ["b", "c"] },
    { id: "e", name: "E", depends_on: ["missing"] },
  ]);
  assert.deepEqual(
    placed.map((p) => [p.step.id, p.layer, p.row]),
    [["a", 0, 0], ["b", 1, 0], ["c", 1, 1], ["d", 2, 0], ["e", 0, 1]],
  );
});

test("a help request's question and options are read from the status message", () => {
  const status = {
    state: "TASK_STATE_INPUT_REQUIRED",
    message: {
      messageId: "t-1:help:1",
      parts: [
        { text: "Full or partial refund?\nOptions: full, partial" },
        {
          data: { channel_id: "t-1", sender: "tiny-harness", kind: "help_request", text: "Full or partial refund?" },
          mediaType: "application/vnd.tiny-harness.channel+json",
        },
      ],
    },
  };
  assert.deepEqual(helpRequest(status), {
    id: "t-1:help:1",
    question: "Full or partial refund?",
    options: ["full", "partial"],
  });
  assert.equal(helpRequest({ message: { parts: [{ text: "done" }] } }), undefined);
});

test("the new task form is sent as a task envelope", () => {
  const envelope = newTaskEnvelope({
    name: " Refund ",
    goal: "Refund order 48213",
    description: "",
    criteria: "refund sent\n\n customer told ",
    participants: [
      { id: "alice", role: "reporter" },
      { id: " ", role: "watcher" },
      { id: "bob", role: "watcher" },
    ],
  });
  assert.deepEqual(envelope, {
    name: "Refund",
    goal: "Refund order 48213",
    acceptance_criteria: [
      { text: "refund sent", met: false },
      { text: "customer told", met: false },
    ],
    participants: [
      { id: "alice", kind: "human", role: "reporter" },
      { id: "bob", kind: "human", role: "watcher" },
    ],
  });
});

test("A2UI messages come from the a2ui artifact's parts; actions go back as v0.9.1", () => {
  const create = { version: "v0.9.1", createSurface: { surfaceId: "s", catalogId: "c" } };
  const artifacts = [
    { name: "a2ui", parts: [{ data: create, mediaType: "application/a2ui+json" }, { text: "x" }] },
    { name: "other", parts: [{ data: { a: 1 }, mediaType: "application/json" }] },
  ];
  assert.deepEqual(a2uiMessages(artifacts), [create]);
  assert.deepEqual(actionMessage({ name: "confirm", surfaceId: "s" }), {
    version: "v0.9.1",
    action: { name: "confirm", surfaceId: "s" },
  });
});

test("the service's base is where /ui/ is served from", () => {
  assert.equal(serviceBase("http://127.0.0.1:8080/ui/#/tasks"), "http://127.0.0.1:8080/");
  assert.equal(serviceBase("https://x.example/Prod/ui/?code=1"), "https://x.example/Prod/");
});
