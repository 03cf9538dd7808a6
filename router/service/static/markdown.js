// Answers and index text are Markdown written by a model: rendered with marked, then cleaned by DOMPurify
// before the page shows them (a model can be made to write <script>, onerror= attributes or ids). The "[Data: Entities (8, 12)]"
// references are turned into small numbered buttons that point at the answer's named citations.
"use strict";

const Markdown = (() => {
  const DATA_BLOCK = /\[Data:\s*([^\[\]]*)\]/gi;
  const PART = /([A-Za-z][A-Za-z ]*?)\s*\(([^()]*)\)/g;
  const KINDS = { sources: "Sources", source: "Sources", entities: "Entities", entity: "Entities",
    relationships: "Relationships", relationship: "Relationships", claims: "Claims", claim: "Claims",
    covariates: "Claims", reports: "Reports", report: "Reports" };
  // SANITIZE_DOM + SANITIZE_NAMED_PROPS: an id or name in the text (an entity description holding
  // <pre id="record-text">) is prefixed "user-content-", so it can never stand in for one of the page's own
  // elements (DOM clobbering).
  const PURIFY = { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input", "img"],
    FORBID_ATTR: ["style"], SANITIZE_DOM: true, SANITIZE_NAMED_PROPS: true };

  // (kind, id) pairs of one "[Data: ...]" block, as the server's citation parser reads them.
  function references(block) {
    const out = [];
    for (const [, name, ids] of block.matchAll(PART)) {
      const kind = KINDS[name.trim().toLowerCase()];
      if (!kind) continue;
      for (const raw of ids.split(",")) {
        const id = raw.trim();
        if (id && !id.startsWith("+") && id.toLowerCase() !== "more") out.push({ kind, id });
      }
    }
    return out;
  }

  // Safe HTML of the Markdown text, in `container`.
  function render(container, text) {
    const html = marked.parse(text, { gfm: true, breaks: false });
    container.replaceChildren(DOMPurify.sanitize(html, { ...PURIFY, RETURN_DOM_FRAGMENT: true }));
    for (const a of container.querySelectorAll("a[href]")) {
      a.setAttribute("rel", "noopener noreferrer");
      a.setAttribute("target", "_blank");
    }
  }

  // Replace each "[Data: ...]" in the rendered text by a <sup> of buttons made by `makeRef(kind, id)`.
  function linkReferences(container, makeRef) {
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (DATA_BLOCK.test(n.nodeValue)) hits.push(n);
      DATA_BLOCK.lastIndex = 0;
    }
    for (const node of hits) {
      const text = node.nodeValue;
      const parts = [];
      let last = 0;
      for (const m of text.matchAll(DATA_BLOCK)) {
        parts.push(document.createTextNode(text.slice(last, m.index).replace(/\s+$/, "")));
        const sup = document.createElement("sup");
        sup.className = "refs";
        for (const ref of references(m[1])) sup.append(makeRef(ref.kind, ref.id));
        parts.push(sup);
        last = m.index + m[0].length;
      }
      parts.push(document.createTextNode(text.slice(last)));
      node.replaceWith(...parts);
    }
  }

  return { render, linkReferences, references };
})();
