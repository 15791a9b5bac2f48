// One task: what it is for, its help request, the agent's reply being typed, A2UI surfaces,
// the plan, criteria, participants, sub-tasks and the conversation; followed live.

import {
  ApiError,
  TASK_METADATA_KEY,
  TERMINAL,
  envelopePart,
  extensionOf,
  helpRequest,
  messageText,
  stateLabel,
  userMessage,
} from "../api";
import type { App } from "../app";
import { a2uiMessages, Surfaces } from "../a2ui";
import { h, fill, notice } from "../dom";
import { Live } from "../live";
import { planSvg, type Step } from "../plan";
import { stepDetail, SubtaskTree, taskLink } from "./task-parts";
import { StreamedText } from "../streamed";

const EDITORS = ["assignee", "reporter", "admin"];
const ROLES = ["assignee", "reporter", "watcher", "admin"];

/** The page's state: the task as last read, with events applied on top. */
interface View {
  task: any;
  selected?: string;
}

export function taskPage(app: App, root: HTMLElement, id: string): () => void {
  const view: View = { task: undefined };
  const streamed = new StreamedText();
  const sections = {
    head: h("header", { class: "task-head" }),
    connection: h("p", { class: "connection", "aria-live": "polite" }),
    flash: h("div", { "aria-live": "assertive" }),
    help: h("section", { id: "help", class: "help", "aria-label": "Help request" }),
    typing: h("section", { id: "typing", "aria-live": "polite" }),
    surfaces: h("div", { id: "surfaces" }),
    plan: h("section", { id: "plan", class: "card", "aria-label": "Plan" }),
    criteria: h("section", { id: "criteria", class: "card" }),
    participants: h("section", { id: "participants", class: "card" }),
    subtasks: h("section", { id: "subtasks", class: "card" }),
    settings: h("section", { id: "settings", class: "card" }),
    conversation: h("section", { id: "conversation", class: "card" }),
  };
  const surfaces = new Surfaces(sections.surfaces, (message) => {
    void send([{ data: message, mediaType: "application/a2ui+json" }]);
  });
  fill(root, notice("info", "Loading the task…"));

  const flash = (err: unknown) =>
    fill(sections.flash, notice("error", err instanceof Error ? err.message : String(err)));

  /** Sends parts on this task without waiting for the run; the stream shows what follows. */
  const send = async (parts: unknown[]): Promise<boolean> => {
    sections.flash.replaceChildren();
    try {
      const me = app.config.auth === "none" ? app.me() : undefined;
      const answer = await app.api.call("SendMessage", {
        message: userMessage(parts, id, me),
        configuration: { returnImmediately: true },
      });
      const status = answer.task?.status;
      const text = messageText(status?.message);
      if (text.startsWith("message not accepted")) {
        flash(text);
        return false;
      }
      // The answer is the task as the message was queued; what follows comes over the stream.
      reread();
      return true;
    } catch (err) {
      flash(err);
      return false;
    }
  };

  const myRole = (): string | undefined => {
    const me = app.me();
    return extensionOf(view.task).participants?.find((p: any) => p.id === me)?.role;
  };

  const apply = (task: any) => {
    view.task = task;
    render();
  };

  const render = () => {
    const task = view.task;
    if (!task) return;
    // A live update redraws the sections: the focused control is focused again afterwards.
    const focused = document.activeElement as HTMLElement | null;
    const again = focused?.id
      ? `#${CSS.escape(focused.id)}`
      : focused?.dataset?.step
        ? `[data-step="${CSS.escape(focused.dataset.step)}"]`
        : undefined;
    if (!root.contains(sections.head)) {
      fill(
        root,
        sections.head,
        sections.connection,
        sections.flash,
        sections.help,
        sections.typing,
        sections.surfaces,
        sections.plan,
        h("div", { class: "grid" }, sections.criteria, sections.participants, sections.subtasks, sections.settings),
        sections.conversation,
      );
    }
    renderHead(task);
    renderHelp(task);
    renderTyping();
    surfaces.update(a2uiMessages(task.artifacts));
    renderPlan(task);
    renderCriteria(task);
    renderParticipants(task);
    renderSubtasks(task);
    renderSettings(task);
    renderConversation(task);
    if (again && document.activeElement !== focused) {
      (root.querySelector(again) as HTMLElement | null)?.focus({ preventScroll: true });
    }
  };

  const renderHead = (task: any) => {
    const ext = extensionOf(task);
    const state = task.status?.state;
    const ended = TERMINAL.includes(state);
    const role = myRole();
    fill(
      sections.head,
      h("p", { class: "crumbs" }, h("a", { href: "#/tasks" }, "← My tasks"),
        ...(ext.parent_tasks ?? []).map((p: any) =>
          h("span", {}, " · parent ", h("a", { href: `#/task/${encodeURIComponent(p.task_id)}` }, p.task_id)))),
      h("h1", {}, ext.name || task.id),
      h("p", {},
        h("span", { id: "task-state", class: `state state-${stateLabel(state).replace(/ /g, "-")}` }, stateLabel(state)),
        task.status?.message && !helpRequest(task.status)
          ? h("span", { id: "status-text", class: "muted" }, ` ${messageText(task.status.message)}`)
          : null),
      h("p", { class: "goal" }, h("strong", {}, "Goal: "), ext.goal ?? ""),
      ext.description ? h("p", { class: "description" }, ext.description) : null,
      !ended && (role === "reporter" || role === "admin")
        ? h("button", { id: "cancel-task", class: "danger", onclick: cancel }, "Cancel task")
        : null,
    );
  };

  const cancel = async () => {
    if (!confirm("Cancel this task?")) return;
    try {
      apply(await app.api.call("CancelTask", { id }));
    } catch (err) {
      flash(err);
    }
  };

  const renderHelp = (task: any) => {
    const help = task.status?.state === "TASK_STATE_INPUT_REQUIRED" ? helpRequest(task.status) : undefined;
    if (!help) {
      sections.help.replaceChildren();
      sections.help.hidden = true;
      return;
    }
    if (sections.help.dataset.request === help.id && !sections.help.hidden) return;
    sections.help.hidden = false;
    sections.help.dataset.request = help.id;
    const reply = h("textarea", { id: "help-reply", rows: 2, "aria-label": "Your answer" }) as HTMLTextAreaElement;
    const answer = async (text: string) => {
      if (!text.trim()) return;
      if (await send([{ text }])) reply.value = "";
    };
    fill(
      sections.help,
      h("h2", {}, "The agent asks"),
      h("p", { class: "question" }, help.question),
      help.options.length
        ? h("div", { class: "options" },
            ...help.options.map((o) => h("button", { class: "option primary", onclick: () => answer(o) }, o)))
        : null,
      h("form", { class: "reply", onsubmit: (e: Event) => { e.preventDefault(); void answer(reply.value); } },
        reply, h("button", { type: "submit" }, "Answer")),
    );
  };

  const renderTyping = () => {
    const texts = streamed.current();
    if (texts.length === 0) {
      sections.typing.replaceChildren();
      return;
    }
    fill(sections.typing, ...texts.map((t) => h("div", { class: "bubble agent typing" }, t)));
  };

  const renderPlan = (task: any) => {
    const steps: Step[] = extensionOf(task).plan?.steps ?? [];
    if (steps.length === 0) {
      fill(sections.plan, h("h2", {}, "Plan"), notice("empty", "No plan yet."));
      return;
    }
    const selected = steps.find((s) => s.id === view.selected);
    const done = steps.filter((s) => s.state === "done").length;
    const svg = planSvg(steps, (step) => {
      view.selected = step.id;
      renderPlan(view.task);
      (sections.plan.querySelector(`[data-step="${CSS.escape(step.id)}"]`) as HTMLElement | null)?.focus();
    });
    fill(
      sections.plan,
      h("h2", {}, `Plan (${done} of ${steps.length} done)`),
      h("div", { class: "plan-scroll" }, svg),
      selected ? stepDetail(selected) : h("p", { class: "muted" }, "Select a step to see its output."),
    );
  };

  const renderCriteria = (task: any) => {
    const criteria: any[] = extensionOf(task).acceptance_criteria ?? [];
    const editable = EDITORS.includes(myRole() ?? "") && !TERMINAL.includes(task.status?.state);
    fill(
      sections.criteria,
      h("h2", {}, "Acceptance criteria"),
      criteria.length === 0
        ? notice("empty", "No criteria.")
        : h("ul", { class: "criteria" },
            ...criteria.map((c, i) => {
              const box = h("input", { type: "checkbox", id: `criterion-${i}`, checked: !!c.met, disabled: !editable }) as HTMLInputElement;
              box.addEventListener("change", async () => {
                const next = criteria.map((x, j) => (j === i ? { ...x, met: box.checked } : x));
                box.disabled = true;
                if (!(await send([envelopePart({ acceptance_criteria: next })]))) box.checked = !box.checked;
                box.disabled = false;
              });
              return h("li", {}, box, h("label", { for: `criterion-${i}` }, c.text));
            })),
    );
  };

  const newId = h("input", { "aria-label": "New participant id", placeholder: "participant id" }) as HTMLInputElement;
  const newRole = h("select", { "aria-label": "New participant role" },
    ...ROLES.map((r) => h("option", { value: r, selected: r === "watcher" }, r))) as HTMLSelectElement;
  const adder = h("form", { class: "inline", onsubmit: async (e: Event) => {
    e.preventDefault();
    const people: any[] = extensionOf(view.task).participants ?? [];
    const id = newId.value.trim();
    if (!id) return;
    if (await send([envelopePart({ participants: [...people, { id, kind: "human", role: newRole.value }] })])) {
      newId.value = "";
    }
  } }, newId, newRole, h("button", { type: "submit" }, "Add"));
  const peopleList = h("ul", { class: "people" });

  const renderParticipants = (task: any) => {
    const people: any[] = extensionOf(task).participants ?? [];
    const admin = myRole() === "admin" && !TERMINAL.includes(task.status?.state);
    const edit = (next: any[]) => send([envelopePart({ participants: next })]);
    const rows = people.map((p, i) => {
      const role = admin && p.kind !== "agent"
        ? (() => {
            const select = h("select", { "aria-label": `Role of ${p.id}` },
              ...ROLES.map((r) => h("option", { value: r, selected: r === p.role }, r))) as HTMLSelectElement;
            select.addEventListener("change", () =>
              void edit(people.map((x, j) => (j === i ? { ...x, role: select.value } : x))));
            return select;
          })()
        : h("span", {}, p.role);
      return h("li", {}, h("span", { class: "pid" }, p.id), " ", p.kind === "agent" ? h("span", { class: "muted" }, "(agent) ") : null, role,
        admin && p.kind !== "agent"
          ? h("button", { "aria-label": `Remove ${p.id}`, onclick: () => void edit(people.filter((_, j) => j !== i)) }, "✕")
          : null);
    });
    adder.hidden = !admin;
    if (!sections.participants.contains(adder)) {
      fill(sections.participants, h("h2", {}, "Participants"), peopleList, adder);
    }
    fill(peopleList, ...rows);
  };

  const tree = new SubtaskTree(app.api, () => view.task && renderSubtasks(view.task));

  const renderSubtasks = (task: any) => {
    const subs: any[] = extensionOf(task).sub_tasks ?? [];
    fill(
      sections.subtasks,
      h("h2", {}, "Sub-tasks"),
      subs.length === 0 ? notice("empty", "No sub-tasks.") : tree.draw(subs),
    );
  };

  const renderSettings = (task: any) => {
    const ext = extensionOf(task);
    if (TERMINAL.includes(task.status?.state) || !EDITORS.includes(myRole() ?? "")) {
      fill(sections.settings, h("h2", {}, "Model"), h("p", {}, `Model: ${ext.model ?? "default"} · effort: ${ext.reasoning_effort ?? "default"}`));
      return;
    }
    const models = app.config.models ?? [];
    const model = h("select", { id: "model-picker", "aria-label": "Model" },
      h("option", { value: "" }, `default${app.config.defaultModel ? ` (${app.config.defaultModel})` : ""}`),
      ...models.map((m) => h("option", { value: m, selected: m === ext.model }, m))) as HTMLSelectElement;
    model.addEventListener("change", () => { if (model.value) void send([{ text: `/model ${model.value}` }]); });
    const effort = h("select", { id: "effort-picker", "aria-label": "Reasoning effort" },
      h("option", { value: "" }, "default"),
      ...["low", "medium", "high"].map((e) => h("option", { value: e, selected: e === ext.reasoning_effort }, e))) as HTMLSelectElement;
    effort.addEventListener("change", () => { if (effort.value) void send([{ text: `/effort ${effort.value}` }]); });
    fill(sections.settings, h("h2", {}, "Model"),
      h("label", {}, h("span", {}, "Model "), model), h("label", {}, h("span", {}, "Effort "), effort));
  };

  // The message box is made once, so a live update never drops what the user is typing.
  const messageInput = h("textarea", { id: "message-input", rows: 2, "aria-label": "Message" }) as HTMLTextAreaElement;
  const messageForm = h("form", { class: "reply", onsubmit: async (e: Event) => {
    e.preventDefault();
    if (messageInput.value.trim() && (await send([{ text: messageInput.value }]))) messageInput.value = "";
  } }, messageInput, h("button", { type: "submit", id: "send-message" }, "Send"));
  const messageList = h("div", { class: "messages" });

  const renderConversation = (task: any) => {
    const history: any[] = task.history ?? [];
    const bubbles = history
      .filter((m) => messageText(m).length > 0)
      .map((m) => {
        const agent = m.role === "ROLE_AGENT";
        const who = agent ? "agent" : (m.metadata?.participant_id ?? "someone");
        return h("div", { class: `bubble ${agent ? "agent" : "user"}` }, h("span", { class: "who" }, who), messageText(m));
      });
    if (!sections.conversation.contains(messageList)) {
      fill(sections.conversation, h("h2", {}, "Conversation"), messageList, messageForm);
    }
    fill(messageList, ...(bubbles.length ? bubbles : [notice("empty", "No messages.")]));
    messageForm.hidden = TERMINAL.includes(task.status?.state);
  };

  let refresh: ReturnType<typeof setTimeout> | undefined;
  const reread = () => {
    clearTimeout(refresh);
    refresh = setTimeout(async () => {
      try {
        apply(await app.api.call("GetTask", { id }));
      } catch (err) {
        flash(err);
      }
    }, 150);
  };

  const onEvent = (event: any) => {
    if (event.artifactUpdate) {
      if (streamed.apply(event.artifactUpdate)) {
        renderTyping();
        return;
      }
      reread();
      return;
    }
    const update = event.statusUpdate;
    if (!update || !view.task) return;
    const ext = update.metadata?.[TASK_METADATA_KEY];
    if (update.status?.message) {
      // The final status message replaces the text that was being typed.
      streamed.clear();
    }
    view.task = {
      ...view.task,
      status: update.status ?? view.task.status,
      metadata: ext ? { ...(view.task.metadata ?? {}), [TASK_METADATA_KEY]: ext } : view.task.metadata,
    };
    render();
    if (update.status?.message || TERMINAL.includes(update.status?.state)) reread();
  };

  let live: Live | undefined;
  const start = async () => {
    try {
      apply(await app.api.call("GetTask", { id }));
    } catch (err) {
      const kind = err instanceof ApiError ? err.kind : "server";
      fill(root, h("h1", {}, kind === "not-found" ? "Task not found" : "Cannot show the task"),
        notice("error", err instanceof Error ? err.message : String(err)),
        h("p", {}, h("a", { href: "#/tasks" }, "Back to my tasks")));
      return;
    }
    if (TERMINAL.includes(view.task.status?.state)) {
      fill(sections.connection, "This task has ended.");
      return;
    }
    live = new Live(app.api, id, {
      task: apply,
      event: onEvent,
      connection: (state, error) => {
        if (state === "live") fill(sections.connection, h("span", { class: "dot live" }), "Live");
        else if (state === "reconnecting") {
          fill(sections.connection, h("span", { class: "dot" }), `Reconnecting… ${error?.message ?? ""}`);
        } else {
          fill(sections.connection, TERMINAL.includes(view.task?.status?.state) ? "This task has ended." : "Not following.");
          if (error) reread();
        }
      },
    });
    void live.run();
  };
  void start();
  return () => {
    live?.stop();
    clearTimeout(refresh);
  };
}
