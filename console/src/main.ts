// The console's entry: reads /ui/config.json, settles who the user is, routes by the hash.

import { makeApp, type App } from "./app";
import { completeSignIn, type ConsoleConfig, identity, setParticipant, setToken, signIn, signOut } from "./auth";
import { h, fill, notice } from "./dom";
import { newTaskPage } from "./pages/new";
import { taskPage } from "./pages/task";
import { tasksPage } from "./pages/tasks";

const main = document.getElementById("main") as HTMLElement;
const who = document.getElementById("who") as HTMLElement;
let leave: (() => void) | undefined;

function signInPage(app: App): void {
  const { config } = app;
  if (config.auth === "none") {
    const input = h("input", { id: "participant-id", required: true, placeholder: "alice", autocomplete: "username" }) as HTMLInputElement;
    fill(main, h("form", { class: "card", id: "sign-in", onsubmit: (e: Event) => {
      e.preventDefault();
      setParticipant(input.value);
      route(app);
    } },
      h("h1", {}, "Who are you?"),
      h("p", {}, "This service trusts the participant id you choose (sent as X-Participant-Id)."),
      h("label", { for: "participant-id" }, h("span", {}, "Participant id"), input),
      h("button", { type: "submit", class: "primary" }, "Continue")));
    input.focus();
    return;
  }
  const token = h("textarea", { id: "token", rows: 3, "aria-label": "Bearer token" }) as HTMLTextAreaElement;
  const status = h("div", { "aria-live": "polite" });
  fill(main, h("div", { class: "card", id: "sign-in" },
    h("h1", {}, "Sign in"),
    config.issuer && config.clientId
      ? h("button", { class: "primary", id: "oidc-sign-in", onclick: () =>
          signIn(config).catch((err) => fill(status, notice("error", String(err.message ?? err)))) },
          `Sign in with ${new URL(config.issuer).host}`)
      : notice("info", "Single sign-on is not configured: paste a token."),
    h("form", { onsubmit: (e: Event) => { e.preventDefault(); setToken(token.value); route(app); } },
      h("label", { for: "token" }, h("span", {}, "Or paste a token"), token),
      h("button", { type: "submit" }, "Use this token")),
    status));
}

function showWho(app: App): void {
  const me = app.me();
  fill(who, me ? h("span", { id: "me" }, me) : null,
    me ? h("button", { id: "sign-out", onclick: () => { signOut(); route(app); } }, "Switch") : null);
}

function route(app: App): void {
  leave?.();
  leave = undefined;
  showWho(app);
  const id = identity(app.config);
  if (!id.participant && !id.token) {
    signInPage(app);
    return;
  }
  const hash = location.hash.replace(/^#/, "") || "/tasks";
  const [path, query = ""] = hash.split("?");
  const params = new URLSearchParams(query);
  if (path === "/new") newTaskPage(app, main);
  else if (path.startsWith("/task/")) leave = taskPage(app, main, decodeURIComponent(path.slice(6)));
  else tasksPage(app, main, params);
  main.focus({ preventScroll: true });
}

async function start(): Promise<void> {
  let config: ConsoleConfig;
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    config = await response.json();
  } catch {
    fill(main, notice("error", "Cannot reach the service (offline?). Reload to try again."));
    return;
  }
  const app = makeApp(config, (target) => {
    if (location.hash === target) route(app);
    else location.hash = target;
  });
  try {
    await completeSignIn(config);
  } catch (err) {
    fill(main, notice("error", `Sign-in failed: ${err instanceof Error ? err.message : String(err)}`));
  }
  window.addEventListener("hashchange", () => route(app));
  route(app);
}

void start();
