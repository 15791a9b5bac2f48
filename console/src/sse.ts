// Server-sent events read from a fetch body: EventSource cannot send the A2A headers.

/** Splits a byte stream of SSE into the `data:` payloads of its events. */
export class SseFrames {
  private buffer = "";

  /** Adds a chunk of text; returns the events it completed (keep-alive comments skipped). */
  push(chunk: string): string[] {
    this.buffer += chunk.replace(/\r/g, "");
    const out: string[] = [];
    let end: number;
    while ((end = this.buffer.indexOf("\n\n")) >= 0) {
      const frame = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const data = frame
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""));
      if (data.length > 0) out.push(data.join("\n"));
    }
    return out;
  }

  /** What is left when the stream ends: a last event without its blank line still counts. */
  finish(): string[] {
    return this.push("\n\n");
  }
}
