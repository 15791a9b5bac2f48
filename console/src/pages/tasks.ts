// My tasks: ListTasks filtered by state, a page at a time.

import { ApiError, extensionOf, stateLabel } from "../api";
import type { App } from "../app";
import { h, fill, notice } from "../dom";

const STATES = [
  ["", "All states"],
  ["TASK_STATE_WORKING", "Working"],
  ["TASK_STATE_INPUT_REQUIRED", "Input required"],
  ["TASK_STATE_SUBMITTED", "Submitted"],
  ["TASK_STATE_COMPLETED", "Completed"],
  ["TASK_STATE_FAILED", "Failed"],
  ["TASK_STATE_CANCELED", "Canceled"],
  ["TASK_STATE_REJECTED", "Rejected"],
];

export function tasksPage(app: App, root: HTMLElement, query: URLSearchParams): void {
  const state = query.get("state") ?? "";
  const select = h(
    "select",
    { id: "state-filter", "aria-label": "Filter by state" },
    ...STATES.map(([value, label]) => h("option", { value, selected: value === state }, label)),
  ) as HTMLSelectElement;
  select.addEventListener("change", () => {
    app.go(select.value ? `#/tasks?state=${select.value}` : "#/tasks");
  });
  const list = h("div", { id: "task-list", "aria-live": "polite" }, notice("info", "Loading…"));
  const more = h("div", { class: "pager" });
  fill(
    root,
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "My tasks"),
      select,
      h("a", { class: "button primary", href: "#/new", id: "new-task" }, "New task"),
    ),
    list,
    more,
  );
  let first = true;
  const load = async (pageToken: string) => {
    const params: any = { pageSize: 25 };
    if (state) params.status = state;
    if (pageToken) params.pageToken = pageToken;
    try {
      const page = await app.api.call("ListTasks", params);
      const tasks: any[] = page.tasks ?? [];
      if (first) list.replaceChildren();
      first = false;
      if (tasks.length === 0 && list.childElementCount === 0) {
        list.appendChild(
          notice("empty", state ? `No tasks in the state “${stateLabel(state)}”.` : "No tasks yet: create one."),
        );
      }
      let table = list.querySelector("ul");
      if (!table && tasks.length > 0) {
        table = h("ul", { class: "tasks" }) as HTMLUListElement;
        list.appendChild(table);
      }
      for (const task of tasks) table!.appendChild(taskRow(task));
      more.replaceChildren();
      if (page.nextPageToken) {
        more.appendChild(
          h("button", { id: "more-tasks", onclick: () => load(page.nextPageToken) }, "More tasks"),
        );
      }
    } catch (err) {
      fill(list, notice("error", err instanceof ApiError ? err.message : String(err)));
    }
  };
  void load("");
}

function taskRow(task: any): HTMLElement {
  const ext = extensionOf(task);
  const state = task.status?.state;
  return h(
    "li",
    { class: "task-row" },
    h("a", { href: `#/task/${encodeURIComponent(task.id)}` }, ext.name || task.id),
    h("span", { class: `state state-${stateLabel(state).replace(/ /g, "-")}` }, stateLabel(state)),
    h("span", { class: "muted" }, ext.goal ?? ""),
  );
}
