// The client against a live MemoryOS (MEMORYOS_URL; `make test` starts one for it).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  APIError,
  ConnectionFailed,
  InvalidInput,
  MemoryClient,
  NotFoundError,
  ROUTES,
} from "../src/index.js";

const URL_ = process.env.MEMORYOS_URL ?? "http://127.0.0.1:8080";
// an operator key (MEMORYOS_API_KEYS of the stack): the tenant keys made below close the open API
const memory = new MemoryClient(URL_, { apiKey: process.env.MEMORYOS_API_KEY });
const DOCS = new Set(["/docs", "/docs/oauth2-redirect", "/redoc"]);

async function eventually<T>(check: () => Promise<T | undefined | null | false>, seconds = 60): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`not within ${seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test("every route of the live API has its method, and every method its route", async () => {
  const spec = (await (await fetch(`${URL_}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, unknown>>;
  };
  const live = new Set<string>();
  for (const [path, methods] of Object.entries(spec.paths)) {
    if (DOCS.has(path)) continue;
    for (const method of Object.keys(methods)) live.add(`${method.toUpperCase()} ${path}`);
  }
  const ours = new Set(Object.values(ROUTES).map(([method, path]) => `${method} ${path}`));
  assert.deepEqual([...live].filter((route) => !ours.has(route)), [], "a route with no method");
  assert.deepEqual([...ours].filter((route) => !live.has(route)), [], "a method with no route");
});

test("turns, memory, retrieval, answers and profiles", async () => {
  assert.deepEqual(await memory.health(), { status: "ok" });
  assert.equal(await memory.ready(), true);
  assert.match(await memory.metrics(), /memoryos_events_total/);
  await memory.setUserProfile("ts-ann", { name: "Ann", plan: "gold" });
  const bot = await memory.setAssistantProfile("ts-bot", { role: "support agent" });
  assert.deepEqual(await memory.getAssistantProfile("ts-bot"), bot);
  const turnId = await memory.addTurn("ts-ann", { query: "My dog is called Miso.", response: "Lovely name!" });
  assert.ok(turnId);
  const batch = await memory.addTurns([
    { user_id: "ts-ann", query: "I live in Porto.", response: "Nice city." },
  ]);
  assert.equal(batch.accepted, 1);
  const sent = await memory.addMessages([
    { user_id: "ts-ann", conversation_id: "c1", role: "user", text: "Where is my parcel?" },
    { user_id: "ts-ann", conversation_id: "c1", role: "assistant", text: "It ships today." },
  ]);
  assert.equal(sent.accepted, 2);
  const stored = await eventually(async () => {
    const window = (await memory.getMemory("ts-ann")).short_term;
    return window.length === 3 && window;
  });
  assert.deepEqual(stored.map((page) => page.query).sort(), [
    "I live in Porto.",
    "My dog is called Miso.",
    "Where is my parcel?",
  ]);
  const found = await memory.retrieve("ts-ann", "What is my dog called?", { top_k: 5 });
  assert.equal(found.user_profile.name, "Ann");
  assert.ok((found.context ?? []).length > 0);
  const reply = await memory.respond("ts-ann", "What is my dog called?", { remember: false });
  assert.ok(reply.response.length > 0);
  const history = await memory.getHistory("ts-ann", 10);
  assert.ok(history.turns.length > 0);
});

test("facts: add, list, edit, history, delete", async () => {
  const { fact_id } = await memory.addFact("ts-bob", { text: "I am allergic to latex.", pinned: true });
  const listed = await eventually(async () => (await memory.listFacts("ts-bob")).facts.find((f) => f.fact_id === fact_id));
  assert.equal(listed.pinned, true);
  await memory.editFact("ts-bob", fact_id, { text: "I am allergic to nickel." });
  await eventually(async () => (await memory.factHistory("ts-bob", fact_id)).changes.length === 2);
  await memory.deleteFact("ts-bob", fact_id);
  await eventually(async () => (await memory.listFacts("ts-bob")).facts.length === 0);
});

test("the tenant: whoami, users, keys, export and import", async () => {
  const me = await memory.whoami();
  assert.equal(me.tenant, "default");
  const users = await memory.listUsers({ limit: 1000 });
  assert.ok(users.users.includes("ts-ann"));
  const made = await memory.createKey({ tenant: "ts-acme", scopes: ["read"], name: "ts" });
  assert.ok(made.key.startsWith("mos_"));
  assert.ok((await memory.listKeys()).keys.some((key) => key.key_id === made.key_id));
  const reader = new MemoryClient(URL_, { apiKey: made.key });
  assert.equal((await reader.whoami()).tenant, "ts-acme");
  await assert.rejects(reader.addTurn("x", { query: "q", response: "r" }), (error: unknown) => {
    assert.ok(error instanceof APIError);
    assert.equal(error.status, 403);
    return true;
  });
  assert.notEqual((await memory.revokeKey(made.key_id)).revoked_at, null);
  const lines = await memory.exportMemory("ts-ann");
  assert.ok(JSON.parse(lines[0]!).format.startsWith("memoryos-export/"));
  const imported = await memory.importMemory(lines);
  assert.ok(imported.imported.pages > 0);
});

test("errors are typed exceptions with the service's message and field", async () => {
  await assert.rejects(memory.retrieve("ts-ann", "q", { top_k: 0 }), (error: unknown) => {
    assert.ok(error instanceof InvalidInput);
    assert.equal(error.status, 422);
    assert.equal(error.field, "top_k");
    return true;
  });
  await assert.rejects(
    memory.deleteFact("ts-ann", "00000000-0000-5000-8000-000000000000"),
    NotFoundError,
  );
  const nowhere = new MemoryClient("http://127.0.0.1:9");
  await assert.rejects(nowhere.health(), ConnectionFailed);
});

test("an id a URL would resolve away is refused before any call", async () => {
  for (const bad of ["", ".", ".."]) {
    await assert.rejects(memory.deleteFact("ts-ann", bad), TypeError);
    await assert.rejects(memory.forgetUser(bad), TypeError);
  }
  assert.ok((await memory.getMemory("ts-ann")).short_term.length > 0, "ts-ann still remembered");
});

test("forget: a user's memory is gone", async () => {
  const deleted = await memory.forgetUser("ts-ann");
  assert.ok(deleted.deleted.short_term > 0, "ts-ann had pages");
  await eventually(async () => (await memory.getMemory("ts-ann")).short_term.length === 0);
});
