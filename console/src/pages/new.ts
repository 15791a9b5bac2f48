// A new task: name, goal, description, criteria and participants, sent as a task envelope.

import { ApiError, envelopePart, userMessage } from "../api";
import type { App } from "../app";
import { h, fill, notice } from "../dom";

const ROLES = ["reporter", "assignee", "watcher", "admin"];

function participantRow(id = "", role = "watcher"): HTMLElement {
  const row = h(
    "div",
    { class: "participant-row" },
    h("input", { class: "p-id", "aria-label": "Participant id", placeholder: "participant id", value: id }),
    h(
      "select",
      { class: "p-role", "aria-label": "Role" },
      ...ROLES.map((r) => h("option", { value: r, selected: r === role }, r)),
    ),
  );
  row.appendChild(h("button", { type: "button", "aria-label": "Remove participant", onclick: () => row.remove() }, "✕"));
  return row;
}

/** The envelope of the form's fields (exported for tests). */
export function newTaskEnvelope(fields: {
  name: string;
  goal: string;
  description: string;
  criteria: string;
  participants: Array<{ id: string; role: string }>;
}): any {
  const envelope: any = { name: fields.name.trim(), goal: fields.goal.trim() };
  if (fields.description.trim()) envelope.description = fields.description.trim();
  const criteria = fields.criteria
    .split("\n")
    .map((c) => c.trim())
    .filter((c) => c.length > 0);
  if (criteria.length > 0) envelope.acceptance_criteria = criteria.map((text) => ({ text, met: false }));
  const participants = fields.participants.filter((p) => p.id.trim().length > 0);
  if (participants.length > 0) {
    envelope.participants = participants.map((p) => ({ id: p.id.trim(), kind: "human", role: p.role }));
  }
  return envelope;
}

export function newTaskPage(app: App, root: HTMLElement): void {
  const me = app.me() ?? "";
  const people = h("div", { id: "participants" }, participantRow(me, "reporter"));
  const status = h("div", { "aria-live": "polite" });
  const field = (id: string, label: string, input: HTMLElement) =>
    h("label", { for: id }, h("span", {}, label), input);
  const form = h(
    "form",
    { id: "new-task-form", class: "card" },
    h("h1", {}, "New task"),
    field("f-name", "Name", h("input", { id: "f-name", required: true, maxlength: 200 })),
    field("f-goal", "Goal", h("input", { id: "f-goal", required: true })),
    field("f-description", "Description", h("textarea", { id: "f-description", rows: 3 })),
    field(
      "f-criteria",
      "Acceptance criteria (one a line)",
      h("textarea", { id: "f-criteria", rows: 3 }),
    ),
    h("fieldset", {}, h("legend", {}, "Participants"), people,
      h("button", { type: "button", id: "add-participant", onclick: () => people.appendChild(participantRow()) }, "Add participant")),
    field("f-message", "First message to the agent", h("textarea", { id: "f-message", rows: 2 })),
    h("button", { type: "submit", class: "primary", id: "create-task" }, "Create task"),
    status,
  ) as HTMLFormElement;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (id: string) => (form.querySelector(`#${id}`) as HTMLInputElement).value;
    const envelope = newTaskEnvelope({
      name: value("f-name"),
      goal: value("f-goal"),
      description: value("f-description"),
      criteria: value("f-criteria"),
      participants: [...people.querySelectorAll(".participant-row")].map((row) => ({
        id: (row.querySelector(".p-id") as HTMLInputElement).value,
        role: (row.querySelector(".p-role") as HTMLSelectElement).value,
      })),
    });
    const text = value("f-message").trim() || envelope.goal;
    const button = form.querySelector("#create-task") as HTMLButtonElement;
    button.disabled = true;
    fill(status, notice("info", "Creating…"));
    try {
      const answer = await app.api.call("SendMessage", {
        message: userMessage([{ text }, envelopePart(envelope)], undefined, app.config.auth === "none" ? me : undefined),
        configuration: { returnImmediately: true },
      });
      const task = answer.task;
      if (!task?.id) throw new ApiError("server", "The service answered without a task.");
      app.go(`#/task/${encodeURIComponent(task.id)}`);
    } catch (err) {
      button.disabled = false;
      fill(status, notice("error", err instanceof Error ? err.message : String(err)));
    }
  });
  fill(root, form);
  (form.querySelector("#f-name") as HTMLElement).focus();
}
