// The memory console: every view is built from the public API with the key typed in the
// header. Text from the API is put into the page as text nodes only, never as markup: a
// customer's words are hostile input.

const KEY = "memoryos.console.key";
const ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
const SECTIONS = [
  ["short-term", "Short-term"],
  ["mid-term", "Mid-term"],
  ["persona", "Persona"],
  ["facts", "Facts"],
  ["history", "Pipeline"],
  ["why", "Why this answer"],
  ["forget", "Forget"],
];
const FACT_CHARS = 1000; // the API's limit on a fact's text
let scopes = new Set();

// --- building blocks ---

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function say(message, kind = "info") {
  const box = document.getElementById("status");
  box.className = `status ${kind}`;
  box.textContent = message;
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime())
    ? String(iso)
    : date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function shown(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function userUrl(userId) {
  return `/console/users/${encodeURIComponent(userId)}`;
}

function can(scope) {
  return scopes.has(scope);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function until(check, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(300);
  }
  return false;
}

// --- the API ---

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
  } catch {
    throw new ApiError(0, "the service cannot be reached");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && typeof data.error === "string" ? data.error : `HTTP ${response.status}`;
    if (response.status === 401) document.getElementById("who").textContent = "This key is not accepted (revoked?): type another.";
    throw new ApiError(response.status, error);
  }
  return data;
}

function users(userId, rest = "") {
  return `/v1/users/${encodeURIComponent(userId)}${rest}`;
}

// Runs an action from a control, saying what happened; the control is disabled meanwhile.
async function act(control, busy, action) {
  if (control) control.disabled = true;
  say(busy);
  try {
    await action();
  } catch (error) {
    say(error instanceof ApiError ? `Refused: ${error.message}` : String(error), "error");
  } finally {
    if (control) control.disabled = false;
  }
}

// --- the header: the key and who it is ---

function setUpKeyForm() {
  const form = document.getElementById("key-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = document.getElementById("key-input").value.trim();
    if (value) sessionStorage.setItem(KEY, value);
    location.reload();
  });
  document.getElementById("key-clear").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    location.reload();
  });
}

async function identify() {
  const who = document.getElementById("who");
  try {
    const me = await api("GET", "/v1/whoami");
    scopes = new Set(me.scopes);
    const key = me.key_id ? `key ${me.key_id}` : "operator key, or an API without keys";
    who.textContent = `Tenant ${me.tenant} · ${key} · may ${[...scopes].join(", ")}`;
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      who.textContent = sessionStorage.getItem(KEY) ? "This key is not accepted." : "This service needs an API key.";
      document.getElementById("key-input").focus();
      return false;
    }
    who.textContent = `Cannot tell who you are: ${error.message}`;
    return false;
  }
}

// --- views ---

function render(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

async function home() {
  document.title = "MemoryOS console";
  const input = h("input", { id: "find-user", name: "user", required: true, autocomplete: "off", maxlength: 128 });
  const form = h(
    "form",
    {
      class: "find",
      onsubmit: (event) => {
        event.preventDefault();
        const userId = input.value.trim();
        if (!ID.test(userId)) {
          say("A user id is 1-128 letters, digits and . _ : @ -, starting with a letter or digit.", "error");
          return;
        }
        location.assign(userUrl(userId));
      },
    },
    h("label", { for: "find-user" }, "User id"),
    input,
    h("button", { type: "submit" }, "Open"),
  );
  const list = h("section", { "aria-labelledby": "users-title" }, h("h2", { id: "users-title" }, "Users"));
  render(h("h1", {}, "Find a user"), form, list);
  if (!can("admin")) {
    list.append(h("p", {}, "Listing a tenant's users needs a key with the admin scope: open a user by id."));
    return;
  }
  const items = h("ul", { class: "users", id: "user-list" });
  const more = h("button", { type: "button", id: "more-users", hidden: true }, "More users");
  list.append(items, more);
  let cursor = null;
  const page = async () => {
    const query = new URLSearchParams({ limit: "50" });
    if (cursor) query.set("cursor", cursor);
    const found = await api("GET", `/v1/users?${query}`);
    for (const userId of found.users) items.append(h("li", {}, h("a", { href: userUrl(userId) }, userId)));
    if (!items.children.length) items.append(h("li", {}, "No user has memory yet."));
    cursor = found.next_cursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", () => act(more, "Loading users…", async () => {
    await page();
    say("");
  }));
  await act(null, "Loading users…", async () => {
    await page();
    say("");
  });
}

function section(id, title, ...children) {
  return h("section", { id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title`, tabindex: -1 }, title), ...children);
}

function pageCard(page, extra) {
  const where = [page.channel, page.conversation_id && `conversation ${page.conversation_id}`, page.assistant_id && `assistant ${page.assistant_id}`]
    .filter(Boolean)
    .join(" · ");
  return h(
    "article",
    { class: "page", id: `page-${page.page_id}` },
    h("p", { class: "meta" }, when(page.timestamp), where && ` · ${where}`, ` · turn ${page.turn_id}`, extra),
    h("p", { class: "said user" }, h("span", { class: "who-said" }, "User: "), page.query),
    h("p", { class: "said assistant" }, h("span", { class: "who-said" }, "Assistant: "), page.response),
  );
}

function shortTerm(memory) {
  const pages = memory.short_term;
  return section(
    "short-term",
    `Short-term (${pages.length} pages, oldest first)`,
    pages.length ? h("ol", { class: "pages" }, pages.map((page) => h("li", {}, pageCard(page)))) : h("p", {}, "No page in the short-term window."),
  );
}

function meter(label, value, max, text) {
  return h(
    "div",
    { class: "heat-row" },
    h("span", { class: "heat-label" }, label),
    h("meter", { min: 0, max, value, "aria-label": `${label}: ${text}`, title: text }),
    h("span", { class: "heat-value" }, text),
  );
}

function midTerm(memory) {
  const segments = [...memory.mid_term].sort((a, b) => b.heat - a.heat);
  const most = (field) => Math.max(1, ...segments.map((s) => s[field]));
  const [visits, interactions, heat] = [most("n_visit"), most("l_interaction"), most("heat")];
  const cards = segments.map((segment, index) =>
    h(
      "article",
      { class: "segment", id: `segment-${segment.segment_id}` },
      h("h3", {}, `Segment ${index + 1}`, h("span", { class: "meta" }, ` · ${segment.segment_id}`)),
      h("p", { class: "summary" }, segment.summary || "(no summary yet)"),
      segment.keywords.length ? h("p", { class: "keywords" }, "Keywords: ", segment.keywords.join(", ")) : null,
      h(
        "div",
        { class: "heat", role: "group", "aria-label": "heat" },
        meter("Heat", segment.heat, heat, segment.heat.toFixed(2)),
        meter("N_visit", segment.n_visit, visits, String(segment.n_visit)),
        meter("L_interaction", segment.l_interaction, interactions, String(segment.l_interaction)),
        meter("Recency", segment.recency, 1, `${segment.recency.toFixed(3)} (last access ${when(segment.last_access)})`),
      ),
      h(
        "details",
        {},
        h("summary", {}, `Pages (${segment.pages.length})`),
        h("ol", { class: "pages" }, segment.pages.map((page) => h("li", {}, pageCard(page)))),
      ),
    ),
  );
  return section(
    "mid-term",
    `Mid-term (${segments.length} segments, hottest first)`,
    cards.length ? cards : h("p", {}, "No segment yet: pages reach the mid-term when they leave the short-term window."),
  );
}

function table(caption, head, rows) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, head.map((name) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows),
    ),
  );
}

function persona(userId, memory) {
  const p = memory.persona;
  const stated = p.stated_profile || {};
  const profile = Object.entries(p.profile);
  const origin = (k) => (Object.hasOwn(stated, k) ? "set through the API" : "from the dialogue");
  const parts = [
    h("h3", {}, "Profile"),
    profile.length
      ? h("dl", { class: "profile" }, profile.map(([k, v]) => [h("dt", {}, k), h("dd", {}, shown(v), h("span", { class: "meta" }, ` (${origin(k)})`))]))
      : h("p", {}, "No profile attribute."),
  ];
  if (can("write")) {
    const text = h("textarea", { id: "profile-json", rows: 4, spellcheck: "false" }, JSON.stringify(stated, null, 2));
    const button = h("button", { type: "submit" }, "Set profile");
    parts.push(
      h(
        "form",
        {
          class: "profile-form",
          onsubmit: (event) => {
            event.preventDefault();
            act(button, "Saving the profile…", async () => {
              let value;
              try {
                value = JSON.parse(text.value);
              } catch {
                throw new Error("The profile must be a JSON object, e.g. {\"name\": \"Ada\"}.");
              }
              await api("PUT", users(userId, "/profile"), value);
              say("Profile saved.", "ok");
              await showUser(userId);
            });
          },
        },
        h("label", { for: "profile-json" }, "Profile set through the API (a JSON object; it replaces the one set before and wins over what the dialogue gives)"),
        text,
        button,
      ),
    );
  }
  const traits = Object.entries(p.traits);
  parts.push(
    h("h3", {}, "Traits"),
    traits.length
      ? table("The user's traits", ["Dimension", "Level", "Why"], traits.map(([name, t]) => h("tr", {}, h("td", {}, name), h("td", {}, t.level), h("td", { class: "text" }, t.reason))))
      : h("p", {}, "No trait yet."),
    h("h3", {}, "Knowledge"),
    p.user_knowledge.length ? h("ul", {}, p.user_knowledge.map((k) => h("li", {}, k))) : h("p", {}, "No knowledge yet."),
    h("h3", {}, "Agent traits"),
    p.agent_traits.length ? h("ul", {}, p.agent_traits.map((k) => h("li", {}, k))) : h("p", {}, "No agent trait yet."),
  );
  for (const [name, assistant] of Object.entries(p.assistants || {})) {
    parts.push(
      h("h3", {}, `Assistant ${name}`),
      assistant.agent_traits.length ? h("ul", {}, assistant.agent_traits.map((k) => h("li", {}, k))) : h("p", {}, "No trait."),
    );
  }
  return section("persona", "Persona", parts);
}

function provenance(fact, pagesHere) {
  if (fact.source === "api") return "added through the API";
  const links = fact.source.turn_ids.map((turnId, i) => {
    const pageId = fact.source.page_ids[i];
    return pageId && pagesHere.has(pageId)
      ? h("a", { href: `#page-${pageId}` }, `turn ${turnId}`)
      : h("span", { title: "no longer in the short- or mid-term" }, `turn ${turnId}`);
  });
  return ["from ", links.flatMap((link, i) => (i ? [", ", link] : [link]))];
}

async function allFacts(userId) {
  const facts = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ include_superseded: "true", limit: "500" });
    if (cursor) query.set("cursor", cursor);
    const found = await api("GET", users(userId, `/facts?${query}`));
    facts.push(...found.facts);
    cursor = found.next_cursor;
  } while (cursor);
  return facts;
}

async function waitForFacts(userId, check) {
  const applied = await until(async () => check(await allFacts(userId)));
  say(applied ? "Applied." : "Accepted; not applied yet: it will be, in the user's order.", applied ? "ok" : "info");
  await showUser(userId);
}

function factRow(userId, fact, pagesHere) {
  const state = fact.superseded_by ? `superseded ${when(fact.superseded_at)}` : fact.pinned ? "current, pinned" : "current";
  const textCell = h("td", { class: "text fact-text" }, fact.text);
  const actions = h("td", { class: "actions" });
  const historyBox = h("div", { class: "fact-history" });
  actions.append(
    h("button", {
      type: "button",
      "aria-label": `History of the fact: ${fact.text}`,
      onclick: (event) =>
        act(event.currentTarget, "Loading the fact's history…", async () => {
          const found = await api("GET", users(userId, `/facts/${fact.fact_id}/history`));
          historyBox.replaceChildren(
            h("ol", {}, found.changes.map((c) => h("li", {}, `${when(c.at)}: ${c.change}`, c.text ? ` "${c.text}"` : ""))),
          );
          say("");
        }),
    }, "History"),
  );
  if (can("write") && !fact.superseded_by) {
    actions.append(
      h("button", {
        type: "button",
        "aria-label": `Edit the fact: ${fact.text}`,
        onclick: () => {
          const input = h("input", { id: `edit-${fact.fact_id}`, value: fact.text, maxlength: FACT_CHARS });
          const save = h("button", { type: "submit" }, "Save");
          textCell.replaceChildren(
            h(
              "form",
              {
                class: "edit",
                onsubmit: (event) => {
                  event.preventDefault();
                  const text = input.value.trim();
                  act(save, "Saving the fact…", async () => {
                    await api("PATCH", users(userId, `/facts/${fact.fact_id}`), { text });
                    await waitForFacts(userId, (facts) => facts.some((f) => f.fact_id === fact.fact_id && f.text === text));
                  });
                },
              },
              h("label", { for: `edit-${fact.fact_id}` }, "New text"),
              input,
              save,
              h("button", { type: "button", onclick: () => showUser(userId) }, "Cancel"),
            ),
          );
          input.focus();
        },
      }, "Edit"),
      h("button", {
        type: "button",
        "aria-label": `${fact.pinned ? "Unpin" : "Pin"} the fact: ${fact.text}`,
        onclick: (event) =>
          act(event.currentTarget, fact.pinned ? "Unpinning…" : "Pinning…", async () => {
            await api("PATCH", users(userId, `/facts/${fact.fact_id}`), { pinned: !fact.pinned });
            await waitForFacts(userId, (facts) => facts.some((f) => f.fact_id === fact.fact_id && f.pinned === !fact.pinned));
          }),
      }, fact.pinned ? "Unpin" : "Pin"),
      h("button", {
        type: "button",
        class: "danger",
        "aria-label": `Delete the fact: ${fact.text}`,
        onclick: (event) => {
          if (!confirm(`Delete this fact of ${userId}?\n\n${fact.text}`)) return;
          act(event.currentTarget, "Deleting the fact…", async () => {
            await api("DELETE", users(userId, `/facts/${fact.fact_id}`));
            await waitForFacts(userId, (facts) => !facts.some((f) => f.fact_id === fact.fact_id));
          });
        },
      }, "Delete"),
    );
  }
  actions.append(historyBox);
  return h(
    "tr",
    { id: `fact-${fact.fact_id}`, class: fact.superseded_by ? "superseded" : "" },
    textCell,
    h("td", {}, fact.kind === "agent_trait" ? `agent trait${fact.assistant_id ? ` (${fact.assistant_id})` : ""}` : "knowledge"),
    h("td", {}, provenance(fact, pagesHere)),
    h("td", { class: "nowrap" }, when(fact.created_at)),
    h("td", {}, state),
    actions,
  );
}

function addFactForm(userId) {
  const text = h("input", { id: "new-fact", required: true, maxlength: FACT_CHARS });
  const kind = h(
    "select",
    { id: "new-fact-kind" },
    h("option", { value: "user_knowledge" }, "knowledge about the user"),
    h("option", { value: "agent_trait" }, "agent trait"),
  );
  const pinned = h("input", { id: "new-fact-pinned", type: "checkbox" });
  const button = h("button", { type: "submit" }, "Add fact");
  return h(
    "form",
    {
      class: "add-fact",
      onsubmit: (event) => {
        event.preventDefault();
        const body = { text: text.value.trim(), kind: kind.value, pinned: pinned.checked };
        act(button, "Adding the fact…", async () => {
          const added = await api("POST", users(userId, "/facts"), body);
          await waitForFacts(userId, (facts) => facts.some((f) => f.fact_id === added.fact_id));
        });
      },
    },
    h("label", { for: "new-fact" }, "New fact"),
    text,
    h("label", { for: "new-fact-kind" }, "Kind"),
    kind,
    h("label", { for: "new-fact-pinned", class: "check" }, pinned, " pinned"),
    button,
  );
}

function factsSection(userId, facts, pagesHere) {
  const rows = facts.map((fact) => factRow(userId, fact, pagesHere));
  return section(
    "facts",
    `Facts (${facts.filter((f) => !f.superseded_by).length} current)`,
    rows.length ? table("Facts, newest first, with where each came from", ["Fact", "Kind", "Source", "Since", "State", "Actions"], rows) : h("p", {}, "No fact yet."),
    can("write") ? addFactForm(userId) : null,
  );
}

function erasureText(userId, erasure) {
  if (!erasure) return "";
  return erasure.complete
    ? `Erasure complete: every stage has purged ${userId} (requested ${when(erasure.requested_at)}).`
    : `Erasure in progress since ${when(erasure.requested_at)}: reads show nothing until every stage has purged ${userId}.`;
}

function historySection(userId, history) {
  const turns = history.turns.map((t) =>
    h("tr", {}, h("td", {}, t.turn_id || ""), h("td", {}, t.place), h("td", {}, t.stages.join(" → ")), h("td", {}, t.segment_id || ""), h("td", {}, when(t.timestamp))),
  );
  const replay = (letters, control) =>
    act(control, "Replaying…", async () => {
      const done = await api("POST", users(userId, "/dead-letters/replay"), letters ? { letters } : {});
      await showUser(userId);
      say(`Sent back ${done.replayed}; skipped ${done.skipped}; no longer on the dead-letter topic: ${done.missing}. A letter that fails again is listed again.`, "ok");
    });
  const letters = history.dead_letters.map((d) =>
    h(
      "tr",
      {},
      h("td", {}, when(d.at)),
      h("td", {}, d.stage),
      h("td", {}, d.error),
      h("td", { class: "text" }, d.reason),
      h("td", {}, `${d.topic} ${d.partition}:${d.offset}`),
      h("td", {}, String(d.attempts)),
      can("admin")
        ? h("td", {}, h("button", {
          type: "button",
          "aria-label": `Replay the dead letter of ${d.stage} at offset ${d.offset}`,
          onclick: (event) => replay([{ topic: d.topic, partition: d.partition, offset: d.offset }], event.currentTarget),
        }, "Replay"))
        : null,
    ),
  );
  const heads = ["When", "Stage", "Error", "Reason", "Source", "Attempts"];
  return section(
    "history",
    "Pipeline",
    history.erasure ? h("p", { class: "erasure" }, erasureText(userId, history.erasure)) : null,
    turns.length ? table("The latest turns, newest first, and where each is", ["Turn", "Place", "Stages", "Segment", "Time"], turns) : h("p", {}, "No turn in the pipeline."),
    letters.length
      ? [
        table("Dead letters, oldest first", can("admin") ? [...heads, "Replay"] : heads, letters),
        can("admin") ? h("button", { type: "button", onclick: (event) => replay(null, event.currentTarget) }, "Replay all of this user's dead letters") : null,
      ]
      : h("p", {}, "No dead letter."),
  );
}

function whySection(userId) {
  const question = h("textarea", { id: "why-question", rows: 2, required: true, maxlength: 4000 });
  const button = h("button", { type: "submit" }, "Show the context");
  const result = h("div", { id: "why-result", "aria-live": "polite" });
  const form = h(
    "form",
    {
      class: "why",
      onsubmit: (event) => {
        event.preventDefault();
        act(button, "Retrieving…", async () => {
          const memory = await api("POST", users(userId, "/retrieve"), { query: question.value, record_visit: false });
          result.replaceChildren(...whyResult(memory));
          say("");
        });
      },
    },
    h("label", { for: "why-question" }, "Question"),
    question,
    button,
  );
  return section(
    "why",
    "Why this answer",
    h("p", {}, "The context a retrieve builds for a question, in prompt order. Looking here does not count as a visit: the segments' heat stays."),
    form,
    result,
  );
}

function whyResult(memory) {
  const stm = new Map(memory.short_term.map((p) => [p.page_id, p]));
  const mtm = new Map(memory.mid_term.map((p) => [p.page_id, p]));
  const items = memory.context.map((pageId, index) => {
    const page = mtm.get(pageId) || stm.get(pageId);
    const score = pageId in memory.scores ? `score ${memory.scores[pageId].toFixed(3)}` : "unranked: the short-term window is in every prompt";
    const tier = mtm.has(pageId) ? `mid-term, segment ${mtm.get(pageId).segment_id}` : "short-term";
    return h("li", { class: "context-page" }, pageCard(page, ` · #${index + 1} · ${score} · ${tier}`));
  });
  const scored = (facts) => h("ul", {}, facts.map((f) => h("li", {}, `${f.text} (score ${f.score.toFixed(3)})`)));
  return [
    h("h3", {}, `Pages (${items.length})`),
    items.length ? h("ol", { class: "pages" }, items) : h("p", {}, "No page."),
    h("h3", {}, "Knowledge"),
    memory.user_knowledge.length ? scored(memory.user_knowledge) : h("p", {}, "None."),
    h("h3", {}, "Agent traits"),
    memory.agent_traits.length ? scored(memory.agent_traits) : h("p", {}, "None."),
  ];
}

function forgetSection(userId, history) {
  const state = h("p", { id: "erasure-state", class: "erasure", "aria-live": "polite" }, erasureText(userId, history.erasure));
  if (!can("forget")) return section("forget", "Forget", h("p", {}, "Forgetting a user needs a key with the forget scope."), state);
  const typed = h("input", { id: "forget-confirm", autocomplete: "off" });
  const confirmButton = h("button", { type: "submit", class: "danger", disabled: true }, `Forget ${userId}`);
  typed.addEventListener("input", () => {
    confirmButton.disabled = typed.value !== userId;
  });
  const dialog = h(
    "dialog",
    { id: "forget-dialog", "aria-labelledby": "forget-dialog-title" },
    h(
      "form",
      {
        onsubmit: (event) => {
          event.preventDefault();
          if (typed.value !== userId) return;
          dialog.close();
          act(null, `Forgetting ${userId}…`, async () => {
            const done = await api("DELETE", users(userId));
            const counts = Object.entries(done.deleted).map(([k, v]) => `${v} ${k.replaceAll("_", " ")}`).join(", ");
            state.textContent = `Deleted ${counts}. Erasure in progress…`;
            say(`Deleted ${counts}; waiting for every stage to purge ${userId}.`);
            let erasure = null;
            await until(async () => {
              erasure = (await api("GET", users(userId, "/history"))).erasure;
              return erasure && erasure.complete;
            }, 60000);
            if (erasure && erasure.complete) await showUser(userId); // nothing of them is left to show
            document.getElementById("erasure-state").textContent = erasureText(userId, erasure);
            say(erasure && erasure.complete ? `${userId} is forgotten.` : `The erasure of ${userId} is still in progress.`, "ok");
          });
        },
      },
      h("h2", { id: "forget-dialog-title" }, `Forget ${userId}?`),
      h("p", {}, `This deletes everything remembered about ${userId}: pages, segments, persona and facts. It cannot be undone.`),
      h("label", { for: "forget-confirm" }, `Type ${userId} to confirm`),
      typed,
      h("div", { class: "buttons" }, confirmButton, h("button", { type: "button", onclick: () => dialog.close() }, "Cancel")),
    ),
  );
  const open = h("button", {
    type: "button",
    class: "danger",
    onclick: () => {
      typed.value = "";
      confirmButton.disabled = true;
      dialog.showModal();
      typed.focus();
    },
  }, `Forget ${userId}…`);
  return section("forget", "Forget", h("p", {}, "Deletes everything remembered about this user, everywhere in the pipeline."), open, state, dialog);
}

async function showUser(userId) {
  const [memory, facts, history] = await Promise.all([
    api("GET", users(userId, "/memory")),
    allFacts(userId),
    api("GET", users(userId, "/history")),
  ]);
  const pagesHere = new Set([...memory.short_term.map((p) => p.page_id), ...memory.mid_term.flatMap((s) => s.pages.map((p) => p.page_id))]);
  const scrolled = window.scrollY;
  const where = document.activeElement?.closest?.("section")?.id;
  render(
    h("h1", {}, "User ", h("span", { class: "user-id" }, userId)),
    h("nav", { "aria-label": "Sections", class: "sections" }, h("ul", {}, SECTIONS.map(([id, name]) => h("li", {}, h("a", { href: `#${id}` }, name))))),
    shortTerm(memory),
    midTerm(memory),
    persona(userId, memory),
    factsSection(userId, facts, pagesHere),
    historySection(userId, history),
    whySection(userId),
    forgetSection(userId, history),
  );
  window.scrollTo(0, scrolled);
  if (where) document.getElementById(`${where}-title`)?.focus({ preventScroll: true });
}

async function userView(raw) {
  let userId;
  try {
    userId = decodeURIComponent(raw);
  } catch {
    userId = "";
  }
  if (!ID.test(userId)) {
    render(h("h1", {}, "Not a user id"), h("p", {}, "A user id is 1-128 letters, digits and . _ : @ -, starting with a letter or digit."), h("p", {}, h("a", { href: "/console" }, "Find a user")));
    return;
  }
  document.title = `${userId} · MemoryOS console`;
  say("Loading…");
  try {
    await showUser(userId);
    say("");
    if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
  } catch (error) {
    const why = error instanceof ApiError ? error.message : String(error);
    render(h("h1", {}, "User ", h("span", { class: "user-id" }, userId)), h("p", { class: "error" }, `This view cannot be shown: ${why}`));
    say(`Refused: ${why}`, "error");
  }
}

async function start() {
  setUpKeyForm();
  const known = await identify();
  if (!known) {
    document.body.dataset.ready = "true";
    render(h("h1", {}, "MemoryOS console"), h("p", {}, "Type an API key above to continue. It is kept in this tab only and sent in a header, never in an address."));
    return;
  }
  const match = location.pathname.match(/^\/console\/users\/([^/]+)$/);
  try {
    if (match) await userView(match[1]);
    else await home();
  } finally {
    document.body.dataset.ready = "true"; // for the browser tests: the first view is built
  }
}

start();
