// Who the user is: a chosen participant id (self-asserted hosts), or a token from the OIDC
// issuer the authorizer trusts (authorization code with PKCE), or a pasted token.

import type { Identity } from "./api";

export interface ConsoleConfig {
  /** `none`: identities are self-asserted (X-Participant-Id); `jwt`: a bearer token. */
  auth: "none" | "jwt";
  issuer?: string;
  clientId?: string;
  /** The audience the authorizer checks: the token chosen must be minted for it. */
  audience?: string;
  models: string[];
  defaultModel?: string;
}

const PARTICIPANT_KEY = "th.participant";
const TOKEN_KEY = "th.token";
const PKCE_KEY = "th.pkce";

export function identity(config: ConsoleConfig): Identity {
  if (config.auth === "jwt") {
    const token = sessionStorage.getItem(TOKEN_KEY) ?? undefined;
    return { token, participant: token ? tokenSubject(token) : undefined };
  }
  return { participant: localStorage.getItem(PARTICIPANT_KEY) ?? undefined };
}

export function setParticipant(id: string): void {
  localStorage.setItem(PARTICIPANT_KEY, id.trim());
}

export function setToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token.trim());
}

export function signOut(): void {
  localStorage.removeItem(PARTICIPANT_KEY);
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The `sub` claim of a JWT (shown as who you are; the service verifies it, not us). */
export function tokenSubject(token: string): string | undefined {
  const sub = claims(token).sub;
  return typeof sub === "string" ? sub : undefined;
}

function claims(token: string): any {
  try {
    const payload = token.split(".")[1] ?? "";
    return JSON.parse(atob(payload.replace(/-/g, "+").replace(/_/g, "/")));
  } catch {
    return {};
  }
}

function audiences(token: string): string[] {
  const aud = claims(token).aud;
  return Array.isArray(aud) ? aud : typeof aud === "string" ? [aud] : [];
}

function base64url(bytes: Uint8Array): string {
  let text = "";
  bytes.forEach((b) => (text += String.fromCharCode(b)));
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function discovery(issuer: string): Promise<any> {
  const url = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
  const response = await fetch(url);
  if (!response.ok) throw new Error(`the issuer's discovery document answered ${response.status}`);
  return response.json();
}

function redirectUri(): string {
  return `${location.origin}${location.pathname}`;
}

/** Sends the browser to the issuer's sign-in page (authorization code, PKCE S256). */
export async function signIn(config: ConsoleConfig): Promise<void> {
  if (!config.issuer || !config.clientId) throw new Error("sign-in is not configured");
  const doc = await discovery(config.issuer);
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  const url = new URL(doc.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: config.clientId,
    redirect_uri: redirectUri(),
    scope: "openid",
    state,
    code_challenge: base64url(new Uint8Array(digest)),
    code_challenge_method: "S256",
  }).toString();
  location.assign(url.toString());
}

/** Completes a sign-in when the issuer sent the browser back with a code; true if it did. */
export async function completeSignIn(config: ConsoleConfig): Promise<boolean> {
  const params = new URLSearchParams(location.search);
  const code = params.get("code");
  if (!code || !config.issuer || !config.clientId) return false;
  const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) ?? "{}");
  sessionStorage.removeItem(PKCE_KEY);
  history.replaceState(null, "", redirectUri() + location.hash);
  if (!saved.verifier || saved.state !== params.get("state")) {
    throw new Error("the sign-in answer does not match the request: sign in again");
  }
  const doc = await discovery(config.issuer);
  const response = await fetch(doc.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri(),
      client_id: config.clientId,
      code_verifier: saved.verifier,
    }),
  });
  if (!response.ok) throw new Error(`the issuer refused the sign-in (${response.status})`);
  const tokens = await response.json();
  // The authorizer checks `aud`: an id token's audience is the client id, an access token's
  // usually the API; the one minted for the configured audience is sent.
  const candidates = [tokens.access_token, tokens.id_token].filter((t) => typeof t === "string");
  const token =
    candidates.find((t) => config.audience && audiences(t).includes(config.audience)) ?? candidates[0];
  if (typeof token !== "string") throw new Error("the issuer sent no token");
  setToken(token);
  return true;
}
