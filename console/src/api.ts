// The service's own A2A binding (JSON-RPC) from the browser, and SubscribeToTask over SSE.

import { SseFrames } from "./sse";

export const TASK_EXTENSION_URI = "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/task/v1";
export const TASK_METADATA_KEY = "io.github.madarauchiha-314.tiny-harness/task";
export const TASK_MEDIA_TYPE = "application/vnd.tiny-harness.task+json";
export const CHANNEL_MEDIA_TYPE = "application/vnd.tiny-harness.channel+json";
export const A2UI_MEDIA_TYPE = "application/a2ui+json";

/** What went wrong, in words; `kind` picks how the page shows it. */
export class ApiError extends Error {
  constructor(
    public kind: "not-found" | "refused" | "unauthorized" | "offline" | "server",
    message: string,
  ) {
    super(message);
  }
}

export interface Identity {
  participant?: string;
  token?: string;
}

/** The service's base URL: where `/ui/` is served from (a deployed stage keeps its prefix). */
export function serviceBase(href: string): string {
  const url = new URL(href);
  const at = url.pathname.lastIndexOf("/ui/");
  const path = at >= 0 ? url.pathname.slice(0, at + 1) : "/";
  return `${url.origin}${path}`;
}

function rpcError(error: { code?: number; message?: string }): ApiError {
  const message = (error.message ?? "").trim();
  switch (error.code) {
    case -32001:
      return new ApiError("not-found", "Task not found (or you are not one of its participants).");
    case -32602:
      return new ApiError("refused", `Invalid request: ${message}`);
    case -32000:
      return new ApiError("refused", `Too many requests: ${message}`);
    default:
      if (error.code !== undefined && error.code <= -32002 && error.code >= -32099) {
        return new ApiError("refused", `Refused: ${message}`);
      }
      return new ApiError("server", `The service failed: ${message || "unknown error"}`);
  }
}

function httpError(status: number): ApiError {
  if (status === 401 || status === 403) {
    return new ApiError("unauthorized", `Not signed in or not allowed (HTTP ${status}).`);
  }
  if (status === 429) return new ApiError("refused", "Too many requests: try again later.");
  if (status >= 400 && status < 500) return new ApiError("refused", `Refused (HTTP ${status}).`);
  return new ApiError("server", `The service failed (HTTP ${status}).`);
}

let nextId = 1;

export class Api {
  constructor(
    private endpoint: string,
    private who: () => Identity,
  ) {}

  private headers(extra: Record<string, string> = {}): Headers {
    const headers = new Headers({
      "A2A-Version": "1.0",
      "A2A-Extensions": TASK_EXTENSION_URI,
      "Content-Type": "application/json",
      ...extra,
    });
    const who = this.who();
    if (who.token) headers.set("Authorization", `Bearer ${who.token}`);
    if (who.participant) headers.set("X-Participant-Id", who.participant);
    return headers;
  }

  private body(method: string, params: unknown): string {
    return JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params });
  }

  private async post(body: string, extra: Record<string, string> = {}, signal?: AbortSignal) {
    try {
      return await fetch(this.endpoint, { method: "POST", headers: this.headers(extra), body, signal });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new ApiError("offline", "Cannot reach the service (offline?).");
    }
  }

  /** One JSON-RPC call: its result, or an ApiError. */
  async call<T = any>(method: string, params: unknown): Promise<T> {
    const response = await this.post(this.body(method, params));
    let answer: any;
    try {
      answer = await response.json();
    } catch {
      throw httpError(response.status);
    }
    if (answer?.error) throw rpcError(answer.error);
    if (!response.ok) throw httpError(response.status);
    return answer.result as T;
  }

  /** SubscribeToTask: calls `onEvent` with each StreamResponse until the server ends the stream. */
  async subscribe(id: string, onEvent: (event: any) => void, signal: AbortSignal): Promise<void> {
    const response = await this.post(
      this.body("SubscribeToTask", { id }),
      { Accept: "text/event-stream" },
      signal,
    );
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream") || !response.body) {
      let answer: any;
      try {
        answer = await response.json();
      } catch {
        throw httpError(response.status);
      }
      throw answer?.error ? rpcError(answer.error) : httpError(response.status);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const frames = new SseFrames();
    const deliver = (data: string) => {
      const value = JSON.parse(data);
      if (value.error) throw rpcError(value.error);
      onEvent(value.result ?? value);
    };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        frames.push(value).forEach(deliver);
      }
      frames.finish().forEach(deliver);
    } catch (err) {
      if (signal.aborted || err instanceof ApiError) throw err;
      throw new ApiError("offline", "The live connection was lost.");
    }
  }
}

let messageCount = 0;

/** A user message with these parts, on `taskId` when given, from `participant` when known. */
export function userMessage(parts: unknown[], taskId?: string, participant?: string): any {
  const random = crypto.getRandomValues(new Uint32Array(2));
  const message: any = {
    messageId: `ui-${Date.now().toString(36)}-${random[0].toString(36)}${random[1].toString(36)}-${messageCount++}`,
    role: "ROLE_USER",
    parts,
  };
  if (taskId) message.taskId = taskId;
  if (participant) message.metadata = { participant_id: participant };
  return message;
}

export function envelopePart(data: unknown) {
  return { data, mediaType: TASK_MEDIA_TYPE };
}

/** The task extension object of a task (empty when absent). */
export function extensionOf(task: any): any {
  return task?.metadata?.[TASK_METADATA_KEY] ?? {};
}

/** The text parts of a message, joined. */
export function messageText(message: any): string {
  return (message?.parts ?? [])
    .filter((p: any) => typeof p.text === "string")
    .map((p: any) => p.text)
    .join("\n");
}

export interface HelpRequest {
  id: string;
  question: string;
  options: string[];
}

/** The help request an INPUT_REQUIRED status message carries: question and options. */
export function helpRequest(status: any): HelpRequest | undefined {
  const message = status?.message;
  const parts: any[] = message?.parts ?? [];
  const data = parts.find((p) => p.mediaType === CHANNEL_MEDIA_TYPE && p.data?.kind === "help_request");
  if (!data) return undefined;
  const text = messageText(message);
  // The options travel in the text's last line ("Options: a, b"), as `HelpRequest::text` writes it.
  const lines = text.split("\n");
  const last = lines[lines.length - 1] ?? "";
  const options = last.startsWith("Options: ")
    ? last.slice("Options: ".length).split(", ").filter((o) => o.length > 0)
    : [];
  return { id: message.messageId ?? "", question: data.data.text || text, options };
}

export const TERMINAL = [
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED",
];

/** `TASK_STATE_INPUT_REQUIRED` → `input required`. */
export function stateLabel(state: string | undefined | null): string {
  return (state ?? "unknown").replace(/^TASK_STATE_/, "").replace(/_/g, " ").toLowerCase();
}
