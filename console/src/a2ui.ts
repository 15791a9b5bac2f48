// A2UI surfaces from the task's `a2ui` artifact, drawn by the official renderer
// (@a2ui/lit's v0.9 basic catalog over @a2ui/web_core's message processor).

import { MessageProcessor } from "@a2ui/web_core/v0_9";
import { basicCatalog } from "@a2ui/lit/v0_9";
import { a2uiMessages, actionMessage } from "./a2ui-messages";

export { a2uiMessages };

export class Surfaces {
  private processor?: MessageProcessor<any>;
  private seen = "";

  constructor(
    private root: HTMLElement,
    private onAction: (message: any) => void,
  ) {}

  /** Draws the surfaces of these messages (rebuilt only when they changed). */
  update(messages: any[]): void {
    const key = JSON.stringify(messages);
    if (key === this.seen) return;
    this.seen = key;
    this.root.replaceChildren();
    this.processor = new MessageProcessor([basicCatalog], (action: any) =>
      this.onAction(actionMessage(action)),
    );
    const shown = new Map<string, HTMLElement>();
    this.processor.onSurfaceCreated((surface: any) => {
      const element = document.createElement("a2ui-surface") as any;
      element.surface = surface;
      const box = document.createElement("section");
      box.className = "surface card";
      box.dataset.surface = surface.id;
      box.setAttribute("aria-label", `Surface ${surface.id}`);
      box.appendChild(element);
      shown.set(surface.id, box);
      this.root.appendChild(box);
    });
    this.processor.onSurfaceDeleted((id: any) => {
      const key = typeof id === "string" ? id : id?.id;
      shown.get(key)?.remove();
      shown.delete(key);
    });
    for (const message of messages) {
      try {
        this.processor.processMessages([message]);
      } catch (err) {
        // The service checked these messages; one the renderer still refuses is shown, not thrown.
        const text = document.createElement("p");
        text.className = "notice notice-error";
        text.textContent = `A surface could not be drawn: ${err instanceof Error ? err.message : String(err)}`;
        this.root.appendChild(text);
      }
    }
  }
}
