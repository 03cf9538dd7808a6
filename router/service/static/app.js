// graphroute web page: asks through the OpenAI-compatible endpoint (streamed), then shows what only
// graphroute knows (route and reasons, plan, escalations, citations, usage per stage). No build step.
"use strict";

const $ = (id) => document.getElementById(id);
const keyStore = window.sessionStorage;

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

async function errorText(resp) {
  try {
    const body = await resp.json();
    return (body.error && body.error.message) || resp.statusText;
  } catch (e) {
    return resp.statusText;
  }
}

async function loadIndexes() {
  const resp = await fetch("/v1/indexes", { headers: headers() });
  if (!resp.ok) {
    $("status").textContent = "Cannot list indexes: " + (await errorText(resp));
    return;
  }
  const body = await resp.json();
  const select = $("index");
  select.replaceChildren();
  for (const ix of body.indexes) {
    const label = `${ix.name} (${ix.entities} entities, ${ix.documents} documents)`;
    select.append(el("option", label, { value: ix.name }));
  }
}

function showRoute(g) {
  $("details").hidden = false;
  const how = g.route.method === "forced" ? `${g.route.engine} chosen by the caller (no routing)`
    : `routed to ${g.route.engine} (confidence ${g.route.confidence.toFixed(2)})`;
  $("route").textContent = `${how}; ` +
    `answered by ${g.engine} search` + (g.stepped_down_from ? `, stepped down from ${g.stepped_down_from}` : "");
  const reasons = $("reasons");
  reasons.replaceChildren(...g.route.reasons.map((r) => el("li", r)));
  const plan = $("plan");
  const items = g.plan.map((p) => el("li", p));
  for (const e of g.escalations) items.push(el("li", `escalated ${e.from_engine} → ${e.to_engine}: ${e.reason}`));
  for (const d of g.degraded) items.push(el("li", `degraded: ${d}`));
  if (!items.length) items.push(el("li", "one engine, no escalation"));
  plan.replaceChildren(...items);
}

function showCitations(g) {
  const list = $("citations");
  const seen = new Set();
  const items = [];
  for (const c of g.citations) {
    const key = c.kind + ":" + c.id;
    if (seen.has(key)) continue;
    seen.add(key);
    const li = el("li");
    li.append(el("span", `${c.kind} ${c.id}` + (c.resolved ? "" : " (unknown id)") + " — "));
    c.text_unit_ids.slice(0, 3).forEach((tu, i) => {
      const b = el("button", `text unit ${i + 1}`, { type: "button", class: "link", "data-unit": tu });
      b.addEventListener("click", () => openRecord(g.index, "text_units", tu));
      li.append(b, " ");
    });
    c.document_ids.slice(0, 2).forEach((doc, i) => {
      const title = c.document_titles[i] || doc;
      const b = el("button", `document: ${title}`, { type: "button", class: "link", "data-doc": doc });
      b.addEventListener("click", () => openRecord(g.index, "documents", doc));
      li.append(b, " ");
    });
    items.push(li);
  }
  if (!items.length) items.push(el("li", "no citations"));
  list.replaceChildren(...items);
}

function showUsage(g) {
  const body = $("usage").querySelector("tbody");
  const rows = [];
  const add = (name, s, strong) => {
    const tr = el("tr", null, strong ? { class: "total" } : {});
    tr.append(el("th", name, { scope: "row" }));
    for (const v of [s.llm_calls, s.prompt_tokens, s.output_tokens, s.cost.toFixed(5), s.seconds.toFixed(3)]) {
      tr.append(el("td", String(v)));
    }
    rows.push(tr);
  };
  for (const [name, s] of Object.entries(g.usage.stages)) add(name, s, false);
  add("total", g.usage.total, true);
  body.replaceChildren(...rows);
}

async function openRecord(index, kind, id) {
  const resp = await fetch(`/v1/indexes/${encodeURIComponent(index)}/${kind}/${encodeURIComponent(id)}`,
    { headers: headers() });
  const dialog = $("record");
  if (!resp.ok) {
    $("record-title").textContent = "Not available";
    $("record-doc").textContent = await errorText(resp);
    $("record-text").textContent = "";
  } else {
    const r = await resp.json();
    if (kind === "text_units") {
      $("record-title").textContent = `Text unit ${r.short_id}`;
      $("record-doc").replaceChildren();
      if (r.document) {
        const b = el("button", `Open document: ${r.document.title}`, { type: "button", class: "link" });
        b.addEventListener("click", () => openRecord(index, "documents", r.document.id));
        $("record-doc").append(b);
      }
    } else {
      $("record-title").textContent = `Document: ${r.title}`;
      $("record-doc").textContent = `${r.text_unit_ids.length} text units`;
    }
    $("record-text").textContent = r.text;
  }
  if (!dialog.open) dialog.showModal();
  $("record-close").focus();
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const answer = $("answer");
  answer.textContent = "";
  answer.setAttribute("aria-busy", "true");
  $("details").hidden = true;
  $("status").textContent = "Routing…";
  $("ask").disabled = true;
  const model = $("mode").value + "@" + $("index").value;
  try {
    const resp = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(),
      body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: question }] }),
    });
    if (!resp.ok) {
      $("status").textContent = "Error: " + (await errorText(resp));
      return;
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const line = buffer.slice(0, cut).trim();
        buffer = buffer.slice(cut + 2);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) {
          $("status").textContent = "Error: " + chunk.error.message;
          continue;
        }
        const ev = chunk.graphroute_event;
        if (ev && ev.type === "route") $("status").textContent = `Routed to ${ev.route}; running ${ev.engine} search…`;
        if (ev && ev.type === "escalation") {
          $("status").textContent = `${ev.from} found nothing (${ev.reason}); escalating to ${ev.to}…`;
          answer.textContent = "";
          continue; // its content delta is the separator for plain clients; this page shows the status line
        }
        const choice = chunk.choices && chunk.choices[0];
        if (choice && choice.delta && choice.delta.content) answer.textContent += choice.delta.content;
        if (chunk.graphroute) {
          const g = chunk.graphroute;
          $("status").textContent = `Answered by ${g.engine} search in ${g.seconds.toFixed(2)} s, cost $${g.cost.toFixed(5)}.`;
          showRoute(g);
          showCitations(g);
          showUsage(g);
        }
      }
    }
  } catch (e) {
    $("status").textContent = "Error: " + e.message;
  } finally {
    answer.setAttribute("aria-busy", "false");
    $("ask").disabled = false;
  }
}

$("ask-form").addEventListener("submit", ask);
$("question").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("ask-form").requestSubmit();
});
$("record-close").addEventListener("click", () => $("record").close());
$("api-key").value = keyStore.getItem("graphroute-key") || "";
$("api-key").addEventListener("change", () => {
  keyStore.setItem("graphroute-key", $("api-key").value);
  loadIndexes();
});
loadIndexes();
