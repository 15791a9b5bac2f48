// What every page shares: the configuration, who the user is, the API client.

import { Api, serviceBase } from "./api";
import { type ConsoleConfig, identity } from "./auth";

export interface App {
  config: ConsoleConfig;
  api: Api;
  base: string;
  /** The participant id the user acts as (the token's subject when signed in). */
  me(): string | undefined;
  /** Goes to a route (`#/tasks`, `#/task/<id>`, `#/new`). */
  go(route: string): void;
}

export function makeApp(config: ConsoleConfig, go: (route: string) => void): App {
  const base = serviceBase(location.href);
  const who = () => {
    const id = identity(config);
    // With a token the service takes the verified subject; no header is needed.
    return config.auth === "jwt" ? { token: id.token } : id;
  };
  return {
    config,
    base,
    api: new Api(base, who),
    me: () => identity(config).participant,
    go,
  };
}
