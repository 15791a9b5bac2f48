// The A2UI messages a task carries and the one a user action sends back (no renderer here).

import { A2UI_MEDIA_TYPE } from "./api";

/** The A2UI messages of a task's artifacts, in order. */
export function a2uiMessages(artifacts: any[] | undefined): any[] {
  const out: any[] = [];
  for (const artifact of artifacts ?? []) {
    for (const part of artifact.parts ?? []) {
      if (part.mediaType !== A2UI_MEDIA_TYPE || part.data === undefined) continue;
      const data = part.data;
      if (Array.isArray(data)) out.push(...data);
      else if (Array.isArray(data?.messages)) out.push(...data.messages);
      else out.push(data);
    }
  }
  return out;
}

/** The action a user took, as the A2UI client-to-server message the service checks. */
export function actionMessage(action: any): any {
  return { version: "v0.9.1", action };
}
