// The web page's behaviour: calls /search and /sparql and shows what they return.
// Text from the server is always inserted with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

async function readError(response) {
  const text = await response.text();
  try {
    return JSON.parse(text).error || text;
  } catch (_) {
    return text;
  }
}

async function search(event) {
  event.preventDefault();
  const params = new URLSearchParams({
    q: $("search-text").value,
    method: $("search-method").value,
    k: $("search-k").value || "10",
  });
  const type = $("search-type").value.trim();
  if (type) params.append("type", type);
  const list = $("search-results");
  list.replaceChildren();
  $("search-provenance-body").textContent = "";
  $("search-status").textContent = "searching…";
  const response = await fetch("/search?" + params.toString(), { headers: { Accept: "application/json" } });
  if (!response.ok) {
    $("search-status").textContent = "error: " + (await readError(response));
    return;
  }
  const data = await response.json();
  $("search-status").textContent = `${data.results.length} result(s) in ${data.elapsed_ms} ms (${data.provenance.pipeline})`;
  for (const row of data.results) {
    const item = element("li", undefined, "result");
    item.append(element("span", row.name, "name"), element("span", row.types.join(", "), "types"),
                element("span", row.score.toFixed(3), "score"), element("div", row.snippet, "snippet"),
                element("a", row.iri, "iri"));
    item.lastChild.href = row.iri;
    list.append(item);
  }
  $("search-provenance-body").textContent = JSON.stringify(data.provenance, null, 2);
}

function cell(term) {
  if (!term) return "";
  if (term.type === "literal" && term["xml:lang"]) return `${term.value} @${term["xml:lang"]}`;
  return term.value;
}

async function runSparql(event) {
  event.preventDefault();
  const table = $("sparql-results");
  table.tHead.replaceChildren();
  table.tBodies[0].replaceChildren();
  $("sparql-status").textContent = "running…";
  const response = await fetch("/sparql", {
    method: "POST",
    headers: { "Content-Type": "application/sparql-query", Accept: "application/sparql-results+json" },
    body: $("sparql-text").value,
  });
  if (!response.ok) {
    $("sparql-status").textContent = "error: " + (await readError(response));
    return;
  }
  const kind = response.headers.get("Content-Type") || "";
  if (!kind.includes("json")) {  // CONSTRUCT / DESCRIBE: show the graph as text
    $("sparql-status").textContent = "graph result";
    const row = table.tBodies[0].insertRow();
    row.insertCell().append(element("pre", await response.text()));
    return;
  }
  const data = await response.json();
  if ("boolean" in data) {
    $("sparql-status").textContent = `ASK: ${data.boolean}`;
    return;
  }
  const vars = data.head.vars;
  const head = table.tHead.insertRow();
  for (const v of vars) head.append(element("th", v));
  for (const binding of data.results.bindings) {
    const row = table.tBodies[0].insertRow();
    for (const v of vars) row.insertCell().textContent = cell(binding[v]);
  }
  const cut = response.headers.get("X-KQE-Truncated");
  $("sparql-status").textContent = `${data.results.bindings.length} row(s)` + (cut ? ` (${cut})` : "");
}

async function info() {
  const response = await fetch("/health");
  if (response.ok) {
    const data = await response.json();
    $("kb-info").textContent = `KB ${data.kb}: ${data.nodes} nodes` + (data.embeddings ? ", embedded" : "");
  }
}

$("search-form").addEventListener("submit", search);
$("sparql-form").addEventListener("submit", runSparql);
info();
