// Pieces of the task page that need nothing of its state: links to tasks, a step's detail,
// and the sub-task tree (children's own sub-tasks read on demand).

import { type Api, extensionOf, stateLabel } from "../api";
import { h } from "../dom";
import type { Step, TaskRef } from "../plan";

export const stateBadge = (state?: string | null) =>
  h("span", { class: `state state-${stateLabel(state).replace(/ /g, "-")}` }, stateLabel(state));

/** A task of this service as a link, a remote agent's as text; with its (mirrored) state. */
export const taskLink = (ref: TaskRef) =>
  ref.agent
    ? h("span", { class: "link" }, `${ref.task_id} (on ${ref.agent.id}) `, stateBadge(ref.state))
    : h("span", { class: "link" },
        h("a", { href: `#/task/${encodeURIComponent(ref.task_id)}` }, ref.task_id), " ", stateBadge(ref.state));

export const stepDetail = (step: Step) =>
  h("div", { class: "step-detail" },
    h("h3", {}, step.name),
    step.description ? h("p", {}, step.description) : null,
    h("p", {}, h("strong", {}, "State: "), step.state ?? "pending"),
    step.output ? h("p", {}, h("strong", {}, "Output: "), step.output) : null,
    (step.linked_tasks ?? []).length
      ? h("p", {}, h("strong", {}, "Sub-tasks: "), ...(step.linked_tasks ?? []).map((t) => taskLink(t)))
      : null);

/** Sub-tasks of sub-tasks, each child read once per mirrored state (one the user may not
 * read stays a leaf). */
export class SubtaskTree {
  private children = new Map<string, { state?: string | null; subs: TaskRef[] } | "hidden">();

  constructor(
    private api: Api,
    private redraw: () => void,
  ) {}

  private async load(ref: TaskRef): Promise<void> {
    const before = this.children.get(ref.task_id);
    this.children.set(ref.task_id, { state: ref.state, subs: before && before !== "hidden" ? before.subs : [] });
    try {
      const child = await this.api.call("GetTask", { id: ref.task_id, historyLength: 0 });
      const subs: TaskRef[] = extensionOf(child).sub_tasks ?? [];
      this.children.set(ref.task_id, { state: ref.state, subs });
      if (subs.length > 0) this.redraw();
    } catch {
      this.children.set(ref.task_id, "hidden");
    }
  }

  draw(refs: TaskRef[], depth = 0): HTMLElement {
    return h("ul", { class: "tree" }, ...refs.map((ref) => {
      const known = this.children.get(ref.task_id);
      if (!ref.agent && known !== "hidden" && (known === undefined || known.state !== ref.state)) {
        void this.load(ref);
      }
      const nested = known && known !== "hidden" && known.subs.length > 0 && depth < 4
        ? this.draw(known.subs, depth + 1)
        : null;
      return h("li", {}, taskLink(ref),
        ref.sub_state ? h("span", { class: "muted" }, ` (${ref.sub_state})`) : null, nested);
    }));
  }
}
