// Following a task live: SubscribeToTask, resubscribed when a stream ends, with backoff and
// a fresh GetTask after every reconnect so nothing missed in between is lost.

import { ApiError, TERMINAL, type Api } from "./api";

export interface LiveHandlers {
  /** A whole task (the stream's first event, or a GetTask after a reconnect). */
  task(task: any): void;
  /** A status-update or artifact-update event. */
  event(event: any): void;
  /** The connection's state, for the page to show. */
  connection(state: "live" | "reconnecting" | "ended", error?: ApiError): void;
}

export class Live {
  private abort = new AbortController();
  private stopped = false;

  constructor(
    private api: Api,
    private id: string,
    private on: LiveHandlers,
  ) {}

  stop(): void {
    this.stopped = true;
    this.abort.abort();
  }

  async run(): Promise<void> {
    let failures = 0;
    let reread = false;
    while (!this.stopped) {
      try {
        if (reread) {
          const task = await this.api.call("GetTask", { id: this.id });
          this.on.task(task);
          if (TERMINAL.includes(task.status?.state)) break;
        }
        reread = true;
        let ended = false;
        await this.api.subscribe(
          this.id,
          (event) => {
            failures = 0;
            this.on.connection("live");
            if (event.task) {
              this.on.task(event.task);
              if (TERMINAL.includes(event.task.status?.state)) ended = true;
            } else {
              const update = event.statusUpdate ?? event.artifactUpdate;
              if (update) this.on.event(event);
              if (TERMINAL.includes(event.statusUpdate?.status?.state)) ended = true;
            }
          },
          this.abort.signal,
        );
        if (ended) break;
        // An interrupted state ends a stream; the next subscription waits for what follows.
      } catch (err) {
        if (this.stopped) return;
        if (err instanceof ApiError && err.kind !== "offline" && err.kind !== "server") {
          // Not found, refused, or a task that ended: nothing to follow.
          if (err.kind === "refused" || err.kind === "not-found" || err.kind === "unauthorized") {
            this.on.connection("ended", err);
            return;
          }
        }
        failures += 1;
        this.on.connection("reconnecting", err instanceof ApiError ? err : undefined);
        const wait = Math.min(10_000, 500 * 2 ** Math.min(failures, 5)) * (0.5 + Math.random() / 2);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
    if (!this.stopped) this.on.connection("ended");
  }
}
