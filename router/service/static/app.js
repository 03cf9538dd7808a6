// graphroute web page: a conversation over the OpenAI-compatible endpoint (streamed, with the earlier turns
// sent as history), the answer's Markdown rendered safely, its citations by name with a preview, the stages
// it went through, and the graph of what it cited. No build step: plain scripts, served from /static.
"use strict";

const $ = (id) => document.getElementById(id);
const KIND_NAMES = { Entities: "entity", Relationships: "relationship", Sources: "passage", Reports: "report",
  Claims: "claim" };
const KEY = "graphroute-key"; // sessionStorage: kept for this tab, gone when it closes
const HISTORY_TURNS = 8; // earlier question/answer pairs sent with a question
const GRAPH_STEP = 30; // entities the graph shows at first, and how many more "show more" adds

const state = { history: [], index: null, keyWaiters: [], graph: null };
const graph = GraphView.create($("graph"), (id) => openEntity(state.index, id));

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function plural(n, word, many) {
  return `${n.toLocaleString()} ${n === 1 ? word : many || word + "s"}`;
}

// ---- the API key: asked for once, kept for the tab ---------------------------------------------------
function headers() {
  const h = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function askForKey(message) {
  $("key-error").textContent = message || "";
  $("api-key").value = "";
  if (!$("key-dialog").open) $("key-dialog").showModal();
  $("api-key").focus();
  return new Promise((resolve) => state.keyWaiters.push(resolve));
}

$("key-form").addEventListener("submit", () => {
  const key = $("api-key").value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  $("forget-key").hidden = false;
  state.keyWaiters.splice(0).forEach((resolve) => resolve(true));
});

// Escape closes the dialog without a key: the request that needed one fails, saying so
$("key-dialog").addEventListener("cancel", () => state.keyWaiters.splice(0).forEach((resolve) => resolve(false)));

$("forget-key").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  $("forget-key").hidden = true;
  loadIndexes();
});

// fetch with the tab's key; a 401 asks for the key and tries again
async function api(path, options) {
  for (;;) {
    const resp = await fetch(path, { ...(options || {}), headers: headers() });
    if (resp.status !== 401) return resp;
    const had = sessionStorage.getItem(KEY);
    sessionStorage.removeItem(KEY);
    if (!(await askForKey(had ? "That key was not accepted; check it and enter it again." : ""))) return resp;
  }
}

async function errorText(resp) {
  if (resp.status === 401) return "this server needs an API key (reload the page to enter it)";
  try {
    const body = await resp.json();
    return (body.error && body.error.message) || resp.statusText;
  } catch (e) {
    return resp.statusText;
  }
}

// ---- indexes --------------------------------------------------------------------------------------------
async function loadIndexes() {
  const resp = await api("/v1/indexes");
  if (!resp.ok) {
    $("status").textContent = "Cannot list the indexes: " + (await errorText(resp));
    return;
  }
  const body = await resp.json();
  const select = $("index");
  select.replaceChildren(...body.indexes.map((ix) => el("option",
    `${ix.name} (${plural(ix.documents, "document")}, ${plural(ix.entities, "entity", "entities")})`,
    { value: ix.name })));
  state.index = select.value;
}

// ---- one turn of the conversation -------------------------------------------------------------------------
function newTurn(question) {
  const li = el("li", null, { class: "turn" });
  li.append(el("p", question, { class: "question" }));
  const parts = {
    li,
    rewrite: el("p", null, { class: "rewrite help", hidden: "" }),
    answer: el("div", null, { class: "answer prose", "aria-busy": "true" }),
    route: el("p", null, { class: "route" }),
    timeline: el("ol", null, { class: "timeline", "aria-label": "Stages" }),
    citations: el("ul", null, { class: "citations", "aria-label": "Citations" }),
  };
  li.append(parts.rewrite, parts.answer, parts.route, parts.timeline, parts.citations);
  $("conversation").append(li);
  $("empty").hidden = true;
  li.scrollIntoView({ block: "start" });
  return parts;
}

function routeLine(g) {
  const how = g.route.method === "forced" ? `${g.engine} search, as chosen`
    : `routed to ${g.route.engine} search (confidence ${g.route.confidence.toFixed(2)})`;
  const stepped = g.stepped_down_from ? `, stepped down from ${g.stepped_down_from}` : "";
  const escalated = g.escalations.map((e) => `; escalated ${e.from_engine} → ${e.to_engine} (${e.reason})`).join("");
  return `${how}${stepped}${escalated}. ${g.route.reasons.slice(0, 3).join("; ")}`;
}

// live: one row per stage event as it arrives; at the end, the measured stages replace them
function stageLive(timeline, ev, started) {
  const text = ev.context_tokens !== undefined ? `${ev.context_tokens.toLocaleString()} context tokens`
    : ev.message + (ev.total ? ` (${ev.step}/${ev.total})` : "");
  const li = el("li", null, { class: "live" });
  li.append(el("span", `${ev.engine} · ${ev.stage}`, { class: "stage" }),
    el("span", `${text} · at ${((performance.now() - started) / 1000).toFixed(1)} s`, { class: "figures" }));
  timeline.append(li);
}

function stageTimeline(timeline, usage) {
  const stages = Object.entries(usage.stages);
  const longest = Math.max(0.001, ...stages.map(([, s]) => s.seconds));
  const rows = stages.map(([name, s]) => {
    const li = el("li");
    const bar = el("span", null, { class: "bar" });
    bar.style.width = `${Math.max(2, (100 * s.seconds) / longest)}%`;
    const tokens = s.llm_calls ? `${plural(s.llm_calls, "call")}, ${s.prompt_tokens.toLocaleString()} in / ` +
      `${s.output_tokens.toLocaleString()} out tokens` : (s.embedding_calls ? `${plural(s.embedding_tokens, "token")} embedded`
      : "no model call");
    li.append(el("span", name.replace(/_/g, " "), { class: "stage" }), el("span", null, { class: "track" }),
      el("span", `${tokens} · ${s.seconds.toFixed(2)} s`, { class: "figures" }));
    li.querySelector(".track").append(bar);
    return li;
  });
  const t = usage.total;
  const total = el("li", null, { class: "total" });
  total.append(el("span", "total", { class: "stage" }), el("span"),
    el("span", `${plural(t.llm_calls, "call")}, ${(t.prompt_tokens + t.output_tokens).toLocaleString()} tokens · ` +
      `${t.seconds.toFixed(2)} s · $${t.cost.toFixed(4)}`, { class: "figures" }));
  timeline.replaceChildren(...rows, total);
}

// ---- citations by name, with the record's text on hover or focus -----------------------------------------
let tips = 0;
function citationItem(index, c, quote) {
  const li = el("li");
  const b = el("button", null, { type: "button", class: "citation" + (c.known ? "" : " unknown"),
    "data-kind": c.kind, "data-id": c.id });
  b.append(el("span", KIND_NAMES[c.kind] || c.kind, { class: "kind" }), el("span", c.label, { class: "label" }));
  b.addEventListener("click", () => openCitation(index, c, quote(c)));
  li.append(b);
  if (c.preview) {
    const id = `tip-${++tips}`;
    b.setAttribute("aria-describedby", id);
    li.append(el("span", c.preview, { class: "preview", role: "tooltip", id }));
  }
  return li;
}

function openCitation(index, c, quote) {
  if (!c.known) return;
  if (c.kind === "Entities") openEntity(index, c.id);
  else if (c.kind === "Sources") openRecord(index, "text_units", c.id, quote);
  else showRecord(c.label, "", c.preview);
}

// The answer's sentences that cite the record (the text before each `[Data: ...]` naming it, back to the
// sentence's start): what the passage is opened scrolled to and highlighting.
function quotedSentences(markdown, kind, id) {
  const quotes = [];
  const refs = /\[Data:([^\]]*)\]/g;
  let m;
  while ((m = refs.exec(markdown))) {
    const part = new RegExp(`${kind}\\s*\\(([^)]*)\\)`).exec(m[1]);
    if (!part || !part[1].split(",").map((s) => s.trim()).includes(String(id))) continue;
    const before = markdown.slice(0, m.index).replace(/[\s.!?]+$/, "");
    const ends = [". ", "! ", "? ", "\n", "]"].map((end) => [before.lastIndexOf(end), end.length]);
    const start = Math.max(0, ...ends.map(([at, length]) => (at < 0 ? 0 : at + length)));
    quotes.push(before.slice(start).replace(/[*_#>`]/g, "").trim());
  }
  return quotes.filter(Boolean).join(" ");
}

async function showCitations(parts, g, markdown, question) {
  const wanted = g.citations.map((c) => ({ kind: c.kind, id: c.id }));
  const resp = await api(`/v1/indexes/${encodeURIComponent(g.index)}/graph`,
    { method: "POST", body: JSON.stringify({ citations: wanted.slice(0, 200), neighbours: 6, max_nodes: GRAPH_STEP }) });
  if (!resp.ok) {
    parts.citations.replaceChildren(el("li", "Citations unavailable: " + (await errorText(resp))));
    return;
  }
  const body = await resp.json();
  const named = new Map(body.citations.map((c) => [c.kind + ":" + c.id, c]));
  const order = body.citations.filter((c) => c.known);
  // a passage cited without a sentence of its own opens at the excerpt that best matches the question
  const quote = (c) => quotedSentences(markdown, c.kind, c.id) || question;
  parts.citations.replaceChildren(...(order.length ? order.map((c) => citationItem(g.index, c, quote))
    : [el("li", "No citations.", { class: "help" })]));
  Markdown.linkReferences(parts.answer, (kind, id) => {
    const c = named.get(kind + ":" + id);
    const n = c ? order.indexOf(c) + 1 : 0;
    const ref = el("button", n ? String(n) : "?", { type: "button", class: "ref",
      title: c ? c.label : `${kind} ${id} is not in this index` });
    if (c) ref.addEventListener("click", () => openCitation(g.index, c, quote(c)));
    return ref;
  });
  state.graph = { index: g.index, citations: wanted.slice(0, 200), shown: GRAPH_STEP };
  showGraph(g.index, body);
}

// "show more": the same answer's graph with GRAPH_STEP more entities
async function showMoreGraph() {
  const g = state.graph;
  if (!g) return;
  g.shown += GRAPH_STEP;
  const resp = await api(`/v1/indexes/${encodeURIComponent(g.index)}/graph`, { method: "POST",
    body: JSON.stringify({ citations: g.citations, neighbours: 6, max_nodes: Math.min(g.shown, 200) }) });
  if (resp.ok) showGraph(g.index, await resp.json());
  else $("graph-caption").textContent = "Cannot show more: " + (await errorText(resp));
}

// ---- the graph and the entity panel ------------------------------------------------------------------------
function showGraph(index, body) {
  state.index = index;
  graph.show(body);
  const list = $("graph-entities");
  list.replaceChildren(...body.nodes.filter((n) => n.cited).map((n) => {
    const li = el("li");
    const b = el("button", n.title, { type: "button", class: "chip", "data-entity": n.id });
    b.addEventListener("click", () => openEntity(index, n.id));
    li.append(b);
    return li;
  }));
  const hidden = body.hidden || 0;
  $("graph-caption").textContent = body.nodes.length
    ? `${plural(body.nodes.filter((n) => n.cited).length, "cited entity", "cited entities")}, ` +
      `${plural(body.nodes.length, "entity", "entities")} and ${plural(body.edges.length, "relationship")} ` +
      "in all" + (hidden ? `; ${plural(hidden, "more entity", "more entities")} hidden` : "") +
      ". Click an entity to open it."
    : "This answer cited no entity or relationship.";
  $("graph-more").hidden = !hidden || !state.graph || state.graph.shown >= 200;
  $("graph-more").textContent = `Show more (${hidden.toLocaleString()} hidden)`;
}

async function openEntity(index, id) {
  const resp = await api(`/v1/indexes/${encodeURIComponent(index)}/entities/${encodeURIComponent(id)}`);
  const panel = $("entity");
  panel.hidden = false;
  if (!resp.ok) {
    $("entity-title").textContent = "Not available";
    $("entity-meta").textContent = await errorText(resp);
    $("entity-description").replaceChildren();
    $("entity-relationships").replaceChildren();
    $("entity-sources").replaceChildren();
    return;
  }
  const e = await resp.json();
  graph.select(e.short_id);
  $("entity-title").textContent = e.title;
  $("entity-meta").textContent = [e.type || "entity", plural(e.relationship_count, "relationship"),
    plural(e.source_count, "source passage")].join(" · ");
  Markdown.render($("entity-description"), e.description || "(no description in the index)");
  $("entity-relationships").replaceChildren(...e.relationships.map((r) => {
    const li = el("li");
    const other = el("button", r.other, { type: "button", class: "link" });
    other.addEventListener("click", () => openEntity(index, r.other));
    li.append(other, el("span", " — " + r.description));
    return li;
  }));
  $("entity-sources").replaceChildren(...e.sources.map((s) => {
    const li = el("li");
    const b = el("button", s.document ? `${s.document.title}, passage ${s.short_id}` : `passage ${s.short_id}`,
      { type: "button", class: "link" });
    b.addEventListener("click", () => openRecord(index, "text_units", s.id, e.title));
    li.append(b, el("span", " " + s.preview, { class: "help" }));
    return li;
  }));
}

// The record's text, its highlights (UTF-16 offsets, in order) as <mark>s; the first is scrolled into view.
function showRecord(title, doc, text, highlights) {
  $("record-title").textContent = title;
  $("record-doc").replaceChildren(doc);
  const pieces = [];
  let at = 0;
  for (const h of highlights || []) {
    if (h.start < at || h.end > text.length) continue;
    pieces.push(text.slice(at, h.start), el("mark", text.slice(h.start, h.end)));
    at = h.end;
  }
  pieces.push(text.slice(at));
  $("record-text").replaceChildren(...pieces);
  if (!$("record").open) $("record").showModal();
  $("record-close").focus({ preventScroll: true });
  const first = $("record-text").querySelector("mark");
  if (first) first.scrollIntoView({ block: "center" });
  else $("record-text").scrollTop = 0;
}

async function openRecord(index, kind, id, quote) {
  const ask = kind === "text_units" && quote ? `?quote=${encodeURIComponent(quote.slice(0, 4000))}` : "";
  const resp = await api(`/v1/indexes/${encodeURIComponent(index)}/${kind}/${encodeURIComponent(id)}${ask}`);
  if (!resp.ok) {
    showRecord("Not available", await errorText(resp), "");
    return;
  }
  const r = await resp.json();
  if (kind === "text_units") {
    const open = r.document ? el("button", `Open the document: ${r.document.title}`, { type: "button", class: "link" }) : "";
    if (open) open.addEventListener("click", () => openRecord(index, "documents", r.document.id));
    showRecord(`Passage ${r.short_id}`, open, r.text, r.highlights);
  } else {
    showRecord(`Document: ${r.title}`, plural(r.text_unit_ids.length, "passage"), r.text);
  }
}

// ---- asking ------------------------------------------------------------------------------------------------
function events(buffer, handle) {
  let cut;
  while ((cut = buffer.indexOf("\n\n")) >= 0) {
    const line = buffer.slice(0, cut).trim();
    buffer = buffer.slice(cut + 2);
    if (line.startsWith("data: ") && line !== "data: [DONE]") handle(JSON.parse(line.slice(6)));
  }
  return buffer;
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const index = $("index").value;
  const parts = newTurn(question);
  const started = performance.now();
  $("question").value = "";
  $("ask").disabled = true;
  $("status").textContent = "Routing…";
  const messages = [...state.history.slice(-2 * HISTORY_TURNS), { role: "user", content: question }];
  let text = "";
  let done = null;
  let drawn = 0; // when the answer was last rendered: at most every 80 ms while it streams, then once at the end
  const draw = () => { drawn = performance.now(); Markdown.render(parts.answer, text); };
  try {
    const resp = await api("/v1/chat/completions", { method: "POST",
      body: JSON.stringify({ model: `${$("mode").value}@${index}`, stream: true, messages }) });
    if (!resp.ok) {
      parts.answer.textContent = "Error: " + (await errorText(resp));
      parts.li.classList.add("failed");
      return;
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buffer = events(buffer + decoder.decode(value, { stream: true }), (chunk) => {
        if (chunk.error) {
          parts.answer.textContent = "Error: " + chunk.error.message;
          parts.li.classList.add("failed");
          return;
        }
        const ev = chunk.graphroute_event;
        if (ev && ev.type === "route") $("status").textContent = `Routed to ${ev.route}; running ${ev.engine} search…`;
        if (ev && ev.type === "stage") stageLive(parts.timeline, ev, started);
        if (ev && ev.type === "escalation") {
          $("status").textContent = `${ev.from} search found nothing (${ev.reason}); trying ${ev.to} search…`;
          text = "";
          draw();
          return; // its content is the separator for plain clients; this page starts the answer again
        }
        const choice = chunk.choices && chunk.choices[0];
        if (choice && choice.delta && choice.delta.content) {
          text += choice.delta.content;
          if (performance.now() - drawn > 80) draw();
        }
        if (chunk.graphroute) done = chunk.graphroute;
      });
    }
    draw();
    if (done) {
      const g = done;
      $("status").textContent = `Answered by ${g.engine} search in ${g.seconds.toFixed(2)} s.`;
      if (g.standalone_question && g.standalone_question !== question) {
        parts.rewrite.textContent = `Read as: ${g.standalone_question}`;
        parts.rewrite.hidden = false;
      }
      parts.route.textContent = routeLine(g);
      parts.li.scrollIntoView({ block: "start" });
      stageTimeline(parts.timeline, g.usage);
      state.history.push({ role: "user", content: question }, { role: "assistant", content: text });
      await showCitations(parts, g, text, question);
    }
  } catch (e) {
    $("status").textContent = "Error: " + e.message;
  } finally {
    parts.answer.setAttribute("aria-busy", "false");
    parts.li.classList.add("answered");
    $("ask").disabled = false;
    $("question").focus();
  }
}

$("ask-form").addEventListener("submit", ask);
$("question").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("ask-form").requestSubmit();
});
$("new-conversation").addEventListener("click", () => {
  state.history = [];
  $("conversation").replaceChildren();
  $("empty").hidden = false;
  $("status").textContent = "New conversation: earlier questions are no longer sent.";
  $("question").focus();
});
$("index").addEventListener("change", () => $("new-conversation").click());
$("record-close").addEventListener("click", () => $("record").close());
$("graph-more").addEventListener("click", showMoreGraph);
$("forget-key").hidden = !sessionStorage.getItem(KEY);
loadIndexes();
