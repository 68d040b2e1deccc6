/**
 * The TypeScript client of MemoryOS Streams: every route of the HTTP API as a method, typed
 * from the service's OpenAPI document (`src/schema.ts`, made by openapi-typescript from
 * `/openapi.json`). `fetch` only: Node 20+ and browsers, no dependencies.
 */
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
type Schemas = components["schemas"];
export type RetrieveResponse = Schemas["RetrieveResponse"];
export type RespondResponse = Schemas["RespondResponse"];
export type MemoryResponse = Schemas["MemoryResponse"];
export type HistoryResponse = Schemas["HistoryResponse"];
export type BatchAccepted = Schemas["BatchAccepted"];
export type MessagesAccepted = Schemas["MessagesAccepted"];
export type TurnIn = Schemas["TurnIn"];
export type QueryIn = Schemas["QueryIn"];
export type RespondIn = Schemas["RespondIn"];
export type FactList = Schemas["FactList"];
export type FactHistory = Schemas["FactHistory"];
export type FactAccepted = Schemas["FactAccepted"];
export type FactIn = Schemas["FactIn"];
export type FactPatch = Schemas["FactPatch"];
export type Deleted = Schemas["Deleted"];
export type UserProfile = Schemas["UserProfile"];
export type AssistantProfile = Schemas["AssistantProfile"];
export type UserList = Schemas["UserList"];
export type WhoAmI = Schemas["WhoAmI"];
export type KeyIn = Schemas["KeyIn"];
export type KeyCreated = Schemas["KeyCreated"];
export type KeyList = Schemas["KeyList"];
export type KeyOut = Schemas["KeyOut"];
export type Imported = Schemas["Imported"];
export type DeadLettersReplayed = Schemas["DeadLettersReplayed"];
export type LetterSource = Schemas["LetterSource"];
type ErrorBody = Schemas["ErrorBody"];

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
type Path = keyof paths;

/** Each method's route: a path the service no longer has does not compile. */
export const ROUTES = {
  addTurn: ["POST", "/v1/users/{user_id}/turns"],
  addTurns: ["POST", "/v1/turns"],
  addMessages: ["POST", "/v1/messages"],
  retrieve: ["POST", "/v1/users/{user_id}/retrieve"],
  respond: ["POST", "/v1/users/{user_id}/respond"],
  getMemory: ["GET", "/v1/users/{user_id}/memory"],
  getHistory: ["GET", "/v1/users/{user_id}/history"],
  replayDeadLetters: ["POST", "/v1/users/{user_id}/dead-letters/replay"],
  forgetUser: ["DELETE", "/v1/users/{user_id}"],
  setUserProfile: ["PUT", "/v1/users/{user_id}/profile"],
  setAssistantProfile: ["PUT", "/v1/assistants/{assistant_id}/profile"],
  getAssistantProfile: ["GET", "/v1/assistants/{assistant_id}/profile"],
  listFacts: ["GET", "/v1/users/{user_id}/facts"],
  addFact: ["POST", "/v1/users/{user_id}/facts"],
  editFact: ["PATCH", "/v1/users/{user_id}/facts/{fact_id}"],
  deleteFact: ["DELETE", "/v1/users/{user_id}/facts/{fact_id}"],
  factHistory: ["GET", "/v1/users/{user_id}/facts/{fact_id}/history"],
  listUsers: ["GET", "/v1/users"],
  whoami: ["GET", "/v1/whoami"],
  createKey: ["POST", "/v1/keys"],
  listKeys: ["GET", "/v1/keys"],
  revokeKey: ["DELETE", "/v1/keys/{key_id}"],
  exportMemory: ["GET", "/v1/export"],
  importMemory: ["POST", "/v1/import"],
  health: ["GET", "/healthz"],
  ready: ["GET", "/readyz"],
  metrics: ["GET", "/metrics"],
} as const satisfies Record<string, readonly [Method, Path]>;

/** A reply of 4xx or 5xx: `status`, the service's `message` and, for bad input, `field`. */
export class APIError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field: string | null = null,
    readonly errors: ErrorBody["errors"] = null,
  ) {
    super(message);
    this.name = new.target.name;
  }
}
/** A 2xx that is not JSON (another service at the URL), or a redirect, which the API never sends. */
export class UnexpectedReply extends APIError {}
export class BadRequest extends APIError {}
export class Unauthorized extends APIError {}
export class Forbidden extends APIError {}
export class NotFoundError extends APIError {}
export class Conflict extends APIError {}
export class PayloadTooLarge extends APIError {}
export class InvalidInput extends APIError {}
export class RateLimited extends APIError {}
export class ServiceUnavailable extends APIError {}
/** No reply at all: the service is not running there, or the network failed. */
export class ConnectionFailed extends Error {
  constructor(message: string, readonly cause?: unknown) {
    super(message);
    this.name = "ConnectionFailed";
  }
}

const ERRORS: Record<number, typeof APIError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFoundError,
  409: Conflict,
  413: PayloadTooLarge,
  422: InvalidInput,
  429: RateLimited,
  503: ServiceUnavailable,
};

export interface ClientOptions {
  /** An API key (Authorization: Bearer): an operator's or a tenant's. */
  apiKey?: string;
  /** Another fetch (tests, a proxy): the platform's by default. */
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | null | undefined>;
type Without<T, K extends keyof T> = Omit<T, K>;

export class MemoryClient {
  readonly baseUrl: string;
  private readonly apiKey?: string;
  private readonly fetcher: typeof fetch;

  /** `baseUrl`: `memoryos up`'s default is http://127.0.0.1:8080. */
  constructor(baseUrl = "http://127.0.0.1:8080", options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  // --- turns, messages, retrieval and answers ---

  async addTurn(userId: string, turn: TurnIn): Promise<string> {
    const reply = await this.call<{ turn_id: string }>("addTurn", { user_id: userId }, turn);
    return reply.turn_id;
  }

  addTurns(turns: Array<TurnIn & { user_id: string }>): Promise<BatchAccepted> {
    return this.call("addTurns", {}, turns);
  }

  addMessages(messages: Array<Record<string, unknown>>): Promise<MessagesAccepted> {
    return this.call("addMessages", {}, messages);
  }

  retrieve(userId: string, query: string, options: Without<QueryIn, "query"> = {}): Promise<RetrieveResponse> {
    return this.call("retrieve", { user_id: userId }, { query, ...options });
  }

  respond(userId: string, query: string, options: Without<RespondIn, "query"> = {}): Promise<RespondResponse> {
    return this.call("respond", { user_id: userId }, { query, ...options });
  }

  getMemory(userId: string): Promise<MemoryResponse> {
    return this.call("getMemory", { user_id: userId });
  }

  getHistory(userId: string, limit?: number): Promise<HistoryResponse> {
    return this.call("getHistory", { user_id: userId }, undefined, { limit });
  }

  /** Send the user's dead letters back (admin): `letters` as the history lists them; none: all. */
  replayDeadLetters(userId: string, letters?: LetterSource[]): Promise<DeadLettersReplayed> {
    return this.call("replayDeadLetters", { user_id: userId }, letters ? { letters } : {});
  }

  forgetUser(userId: string): Promise<Deleted> {
    return this.call("forgetUser", { user_id: userId });
  }

  // --- profiles ---

  setUserProfile(userId: string, profile: Record<string, unknown>): Promise<UserProfile> {
    return this.call("setUserProfile", { user_id: userId }, profile);
  }

  setAssistantProfile(assistantId: string, profile: Record<string, unknown>): Promise<AssistantProfile> {
    return this.call("setAssistantProfile", { assistant_id: assistantId }, profile);
  }

  getAssistantProfile(assistantId: string): Promise<AssistantProfile> {
    return this.call("getAssistantProfile", { assistant_id: assistantId });
  }

  // --- facts ---

  listFacts(
    userId: string,
    options: { kind?: "user_knowledge" | "agent_trait"; include_superseded?: boolean; limit?: number; cursor?: string } = {},
  ): Promise<FactList> {
    return this.call("listFacts", { user_id: userId }, undefined, options);
  }

  addFact(userId: string, fact: FactIn): Promise<FactAccepted> {
    return this.call("addFact", { user_id: userId }, fact);
  }

  editFact(userId: string, factId: string, patch: FactPatch): Promise<FactAccepted> {
    return this.call("editFact", { user_id: userId, fact_id: factId }, patch);
  }

  deleteFact(userId: string, factId: string): Promise<FactAccepted> {
    return this.call("deleteFact", { user_id: userId, fact_id: factId });
  }

  factHistory(userId: string, factId: string): Promise<FactHistory> {
    return this.call("factHistory", { user_id: userId, fact_id: factId });
  }

  // --- the tenant: users and keys (an admin key), export and import ---

  listUsers(options: { cursor?: string; limit?: number } = {}): Promise<UserList> {
    return this.call("listUsers", {}, undefined, options);
  }

  whoami(): Promise<WhoAmI> {
    return this.call("whoami", {});
  }

  createKey(key: KeyIn): Promise<KeyCreated> {
    return this.call("createKey", {}, key);
  }

  listKeys(): Promise<KeyList> {
    return this.call("listKeys", {});
  }

  revokeKey(keyId: string): Promise<KeyOut> {
    return this.call("revokeKey", { key_id: keyId });
  }

  /** The tenant's memory (or one user's) as NDJSON lines, the first a header. */
  async exportMemory(userId?: string): Promise<string[]> {
    const text = await this.call<string>("exportMemory", {}, undefined, { user_id: userId }, "text");
    return text.split("\n").filter((line) => line.length > 0);
  }

  /** Load an export (the operator's key): lines as `exportMemory` gives them. */
  importMemory(lines: string[]): Promise<Imported> {
    return this.call("importMemory", {}, lines.join("\n") + "\n", {}, "json", "application/x-ndjson");
  }

  // --- health ---

  health(): Promise<{ status: string }> {
    return this.call("health", {});
  }

  async ready(): Promise<boolean> {
    try {
      await this.call("ready", {});
      return true;
    } catch (error) {
      if (error instanceof ServiceUnavailable) return false;
      throw error;
    }
  }

  metrics(): Promise<string> {
    return this.call("metrics", {}, undefined, {}, "text");
  }

  // --- one request ---

  private async call<T>(
    name: keyof typeof ROUTES,
    params: Record<string, string>,
    body?: unknown,
    query: Query = {},
    read: "json" | "text" = "json",
    contentType = "application/json",
  ): Promise<T> {
    const [method, template] = ROUTES[name];
    const path = template.replace(/\{(\w+)\}/g, (_, key: string) => {
      const value = params[key];
      if (value === undefined) throw new TypeError(`${name}: ${key} is required`);
      // a URL's dot segments are resolved away: "..", kept, would reach another route
      if (value === "" || value === "." || value === "..") {
        throw new TypeError(`${name}: ${key} cannot be ${JSON.stringify(value)}`);
      }
      return encodeURIComponent(value);
    });
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null) search.set(key, String(value));
    }
    const url = `${this.baseUrl}${path}${search.size ? `?${search}` : ""}`;
    const headers: Record<string, string> = {};
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    let payload: string | undefined;
    if (body !== undefined) {
      headers["content-type"] = contentType;
      payload = typeof body === "string" ? body : JSON.stringify(body);
    }
    let reply: Response;
    try {
      reply = await this.fetcher(url, { method, headers, body: payload, redirect: "manual" });
    } catch (cause) {
      throw new ConnectionFailed(`no reply from ${this.baseUrl}: ${String(cause)}`, cause);
    }
    if (!reply.ok) throw await failure(reply);
    const text = await reply.text();
    if (read === "text") return text as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new UnexpectedReply(reply.status, `an unexpected reply (not JSON): ${text.slice(0, 200)}`);
    }
  }
}

async function failure(reply: Response): Promise<APIError> {
  const kind = ERRORS[reply.status] ?? APIError;
  const text = await reply.text();
  try {
    const body = JSON.parse(text) as ErrorBody;
    return new kind(reply.status, body.error ?? text, body.field ?? null, body.errors ?? null);
  } catch {
    return new kind(reply.status, text || reply.statusText);
  }
}
