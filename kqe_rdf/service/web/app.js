// The web page's behaviour: calls /search and /sparql and shows what they return.
// Text from the server is always inserted with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const SHARED_SEARCH = location.hash.slice(1);  // read before YASGUI, which clears the fragment

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

// A node's IRI comes from the KB's data, which may be hostile: only an http(s) IRI becomes a link (a
// `javascript:` one would run in this page's origin when clicked); any other is shown as text.
function isWebLink(iri) {
  return /^https?:\/\//i.test(String(iri).trim());
}

function iriElement(iri) {
  const node = element(isWebLink(iri) ? "a" : "span", iri, "iri");
  if (isWebLink(iri)) node.href = iri;
  return node;
}

// A node of the KB (a result, a provenance node) opens its own page on this server, where its facts are.
const nodePage = (iri) => "/node?iri=" + encodeURIComponent(iri);

function nodeElement(text, iri, className) {
  const node = element("a", text, className);
  node.href = nodePage(iri);
  node.title = iri;
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

// ---------------------------------------------------------------- search results, a page at a time
// A search may return up to 1,000 results (k): they are kept here and drawn PAGE at a time.
const PAGE = 20;
const shownSearch = { data: null, page: 0, words: [] };

// The words of a request that a result's text is marked with: folded, three letters or more, not a question's
// or a sentence's small words ("which", "has").
const SMALL_WORDS = new Set(("the and for with without which what who whom whose when where how has have had having " +
  "are was were been being does did that this these those from into not any all its his her their there than " +
  "then can could should would will may might about also").split(" "));
function requestWords(text) {
  return [...new Set((String(text).toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) || []))].filter((w) => !SMALL_WORDS.has(w));
}

// ``text`` as text nodes, with the words of the request (as a word's start: "seizure" marks "seizures") in
// <mark> elements: built with the DOM, never parsed as HTML, so a result's text stays inert.
function marked(text, words) {
  const out = document.createDocumentFragment();
  if (!words.length) {
    out.append(String(text));
    return out;
  }
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})`, "giu");
  let last = 0;
  for (const match of String(text).matchAll(pattern)) {
    out.append(text.slice(last, match.index), element("mark", match[0]));
    last = match.index + match[0].length;
  }
  out.append(text.slice(last));
  return out;
}

async function search(event) {
  event.preventDefault();
  closeSuggestions();
  const params = new URLSearchParams({
    q: $("search-text").value,
    method: $("search-method").value,
    k: $("search-k").value || "10",
  });
  const type = $("search-type").value.trim();
  if (type) params.append("type", type);
  history.replaceState(null, "", "#" + params.toString());  // a shareable link: the search is in the URL
  $("search-results").replaceChildren();
  $("search-pager").hidden = true;
  $("provenance-graph").replaceChildren();
  $("provenance-graph").hidden = true;
  $("search-provenance-body").textContent = "";
  $("search-status").textContent = "searching…";
  const response = await fetch("/search?" + params.toString(), { headers: { Accept: "application/json" } });
  if (!response.ok) {
    $("search-status").textContent = "error: " + (await readError(response));
    return;
  }
  const data = await response.json();
  $("search-status").textContent = `${data.results.length} result(s) in ${data.elapsed_ms} ms (${data.provenance.pipeline})`;
  Object.assign(shownSearch, { data, page: 0, words: requestWords(data.query) });
  showPage(0);
  $("search-provenance-body").textContent = JSON.stringify(data.provenance, null, 2);
  const explain = data.provenance.explain;
  const first = data.results[0];
  if (first && "value" in first) showFact(first);
  else if (explain && explain.triplets && first) showProvenance(explain, first);
}

function showPage(page) {
  const { data, words } = shownSearch;
  const pages = Math.max(1, Math.ceil(data.results.length / PAGE));
  shownSearch.page = page = Math.min(Math.max(0, page), pages - 1);
  const explain = data.provenance.explain;
  const rows = data.results.slice(page * PAGE, (page + 1) * PAGE);
  $("search-results").start = page * PAGE + 1;
  $("search-results").replaceChildren(...rows.map((row) => ("value" in row ? valueItem(row) : resultItem(row, explain, words))));
  $("search-pager").hidden = pages < 2;
  $("search-page").textContent = `results ${page * PAGE + 1}–${page * PAGE + rows.length} of ${data.results.length}`;
  $("search-previous").disabled = page === 0;
  $("search-next").disabled = page >= pages - 1;
}

// A node: its name (a link to its page), classes and score; its description's first sentence with the request's
// words marked; its IRI.
function resultItem(row, explain, words) {
  const item = element("li", undefined, "result");
  item.append(nodeElement(row.name, row.iri, "name"), element("span", row.types.join(", "), "types"),
              element("span", row.score.toFixed(3), "score"));
  if (row.filler) {  // topped up from the fallback search, not an answer of the structural reading
    item.classList.add("filler");
    item.append(element("span", "filler: from the fallback search, not an answer of the reading", "filler-note"));
  }
  if (explain && explain.triplets) {
    const why = element("button", "why?", "why");
    why.type = "button";
    why.title = "draw how this result was reached";
    why.addEventListener("click", async () => {
      await showProvenance(explain, row);
      $("provenance-graph").scrollIntoView({ block: "nearest" });
    });
    item.append(why);
  }
  const snippet = element("div", undefined, "snippet");
  snippet.append(marked(row.description !== undefined ? row.description : row.snippet, words));
  item.append(snippet, iriElement(row.iri));
  return item;
}

const XSD = "http://www.w3.org/2001/XMLSchema#";
const datatypeName = (iri) => (String(iri).startsWith(XSD) ? "xsd:" + iri.slice(XSD.length) : localName(iri));

// A value the request asked for ("when was X released"): the literal with its datatype, and the fact it comes
// from (the node it is of, linked to its page; the relation), not a node of its own.
function valueItem(row) {
  const item = element("li", undefined, "result value");
  item.append(element("span", row.value, "name literal"), element("span", datatypeName(row.datatype), "datatype"),
              element("span", row.score.toFixed(3), "score"));
  const fact = element("div", undefined, "fact");
  if (row.fact) {
    fact.append("from the fact ", nodeElement(row.fact.of_name, row.fact.of, "of"), ` ${row.fact.relation} `,
                element("span", row.value, "literal"));
  } else {
    fact.append(row.snippet);  // a count: the answers it counts
  }
  item.append(fact);
  return item;
}

// A value answer's provenance is one fact, said in words (there is no path of request terms to draw).
function showFact(row) {
  const figure = $("provenance-graph");
  const caption = element("figcaption");
  caption.append(element("strong", row.value), ` (${datatypeName(row.datatype)}): the value the request asks for`);
  const fact = element("p", undefined, "fact");
  if (row.fact) fact.append(nodeElement(row.fact.of_name, row.fact.of, "of"), ` ${row.fact.relation} `, element("span", row.value, "literal"));
  else fact.append(row.snippet);
  figure.replaceChildren(caption, fact);
  figure.hidden = false;
}

// ---------------------------------------------------------------- provenance as a small graph
// A structured result's provenance drawn as its triplets: the request's constants (as linked to KB nodes),
// the relation path, and the answer. Solid edges are paths this answer satisfies (from the explanation's
// support: SPARQL bindings or hierarchy matches), amber ones paths it satisfies only through a more general
// term of the hierarchy, dashed grey ones paths it does not satisfy, red ones negated paths.

const SVG = "http://www.w3.org/2000/svg";
const MAX_CONSTANTS = 12;
const labelCache = new Map();

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

const localName = (iri) => decodeURIComponent(String(iri).split(/[#/]/).pop());
const nameOf = (iri) => labelCache.get(iri) || localName(iri);

// Names of IRIs the explanation holds only as IRIs (bindings, annotations), from the KB's own /sparql.
// Only IRIs that are safe inside <...> are asked for; without an answer the graph shows local names.
async function fetchLabels(iris) {
  const wanted = [...new Set(iris)].filter((iri) => !labelCache.has(iri) && /^[a-z][a-z0-9+.-]*:[^\s<>"{}|^`\\]*$/i.test(iri));
  if (!wanted.length) return;
  const query = `SELECT ?s ?name WHERE { VALUES ?s { ${wanted.map((i) => `<${i}>`).join(" ")} } ?s rdfs:label ?name }`;
  try {
    const response = await fetch("/sparql", {
      method: "POST",
      headers: { "Content-Type": "application/sparql-query", Accept: "application/sparql-results+json" },
      body: query,
    });
    if (!response.ok) return;
    for (const b of (await response.json()).results.bindings) labelCache.set(b.s.value, b.name.value);
  } catch (_) {
    // names are a nicety: the graph is drawn with local names
  }
}

// What the explanation says about one answer: the IRIs it bound, and the hierarchy match per request term.
function supportOf(explain, iri) {
  const bound = {}, matched = {}, held = new Set();
  for (const row of (explain.support || {})[iri] || []) {
    if ("term" in row) {  // a hierarchy match: IC 0 is the root, i.e. nothing in common
      matched[row.term] = row;
      if (row.ic > 0) held.add(row.term);
    } else {
      for (const [name, value] of Object.entries(row)) {
        if (name !== "unit") { bound["?" + name] = value; held.add(value); }
      }
    }
  }
  return { bound, matched, held, found: iri in (explain.support || {}) };
}

function provenanceModel(explain, result) {
  const reading = explain.triplets;
  const { bound, matched, held, found } = supportOf(explain, result.iri);
  const nodes = new Map(), edges = [];
  const linked = explain.linked || {};
  let hidden = 0;
  const node = (end) => {
    if (nodes.has(end)) return nodes.get(end);
    let made;
    if (end === reading.answer) {
      made = { key: end, kind: "answer", label: result.name, sub: `answer ${end}` };
    } else if (end.startsWith("?")) {
      made = { key: end, kind: "variable", label: bound[end] ? nameOf(bound[end]) : end,
               sub: bound[end] ? `bound to ${end}` : found ? "some node that joins the path" : "any node",
               iri: bound[end] };
    } else {
      const candidates = linked[end] || [];
      const pick = candidates.find((c) => held.has(c.iri)) || candidates[0];
      const match = pick && matched[pick.iri];
      let sub = pick ? `"${end}" · ${pick.how} ${pick.score}` : `"${end}" · not linked`;
      let partial = false;
      if (match) {
        const as = match.annotations.filter((a) => a !== match.term).map(nameOf);
        partial = match.ic > 0 && match.ancestor !== match.term;
        if (!(match.ic > 0)) sub = "not annotated, nor anything like it";
        else if (partial) sub = `only via ${nameOf(match.ancestor)}`;
        else sub = match.annotations.includes(match.term) ? "annotated" : `as ${as.slice(0, 2).join(", ")}`;
        sub += ` · IC ${match.ic}`;
      }
      made = { key: end, kind: "constant", label: pick ? pick.name : end, sub, iri: pick && pick.iri,
               held: pick ? held.has(pick.iri) : false, partial };
    }
    nodes.set(end, made);
    return made;
  };
  for (const t of reading.triplets) {
    const constant = [t.head, t.tail].find((e) => !e.startsWith("?"));
    if (constant && !nodes.has(constant) && [...nodes.values()].filter((n) => n.kind === "constant").length >= MAX_CONSTANTS) {
      hidden += 1;
      continue;
    }
    const head = node(t.head), tail = node(t.tail);
    const ends = [head, tail].filter((n) => n.kind !== "answer");
    // A variable the SPARQL does not return is satisfied by whatever node joins the path.
    const holds = found && ends.every((n) => n.kind !== "constant" || n.held);
    edges.push({ from: head, to: tail, label: (t.negated ? "NOT " : "") + localName(t.relation),
                 negated: t.negated, holds, partial: holds && ends.some((n) => n.partial) });
  }
  return { nodes: [...nodes.values()], edges, hidden, found };
}

function layout(model) {
  // Columns: constants first, variables by their distance from a constant, the answer last.
  const column = new Map();
  for (const n of model.nodes) if (n.kind === "constant") column.set(n, 0);
  for (let changed = true, round = 0; changed && round < 10; round += 1) {
    changed = false;
    for (const e of model.edges) {
      for (const [a, b] of [[e.from, e.to], [e.to, e.from]]) {
        if (b.kind === "variable" && column.has(a) && (!column.has(b) || column.get(b) > column.get(a) + 1)) {
          column.set(b, column.get(a) + 1);
          changed = true;
        }
      }
    }
  }
  const last = Math.max(0, ...[...column.values()]) + 1;
  for (const n of model.nodes) if (!column.has(n)) column.set(n, n.kind === "answer" ? last : 1);
  const answer = model.nodes.find((n) => n.kind === "answer");
  if (answer) column.set(answer, Math.max(last, column.get(answer)));
  const columns = [];
  for (const [n, c] of column) (columns[c] = columns[c] || []).push(n);
  return columns.filter(Boolean);
}

// Up to ``lines`` lines of at most ``width`` characters, broken between words; "…" when cut.
function wrap(text, width, lines) {
  const out = [""];
  for (const word of String(text).split(/\s+/)) {
    const line = out[out.length - 1];
    if (!line || line.length + 1 + word.length <= width) out[out.length - 1] = line ? `${line} ${word}` : word;
    else out.push(word);
  }
  const kept = out.slice(0, lines).map((l) => (l.length > width ? l.slice(0, width - 1) + "…" : l));
  if (out.length > lines) kept[lines - 1] = kept[lines - 1].slice(0, width - 1) + "…";
  return kept;
}

function drawProvenance(model) {
  const W = 200, H = 54, GAP_X = 90, GAP_Y = 14, PAD = 12;
  const columns = layout(model);
  const tallest = Math.max(...columns.map((c) => c.length));
  const height = PAD * 2 + tallest * (H + GAP_Y) - GAP_Y + (model.hidden ? 24 : 0);
  const width = PAD * 2 + columns.length * (W + GAP_X) - GAP_X;
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
                            "aria-label": "provenance graph" });
  const defs = svg("defs");
  for (const [id, colour] of [["arrow", "#23395d"], ["arrow-partial", "#b26b00"], ["arrow-miss", "#a0a8b5"],
                              ["arrow-not", "#b3261e"]]) {
    const marker = svg("marker", { id, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
                                   orient: "auto-start-reverse" });
    marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: colour }));
    defs.append(marker);
  }
  root.append(defs);
  columns.forEach((column, c) => {
    const top = PAD + ((tallest - column.length) * (H + GAP_Y)) / 2;
    column.forEach((n, i) => { n.x = PAD + c * (W + GAP_X); n.y = top + i * (H + GAP_Y); });
  });
  for (const e of model.edges) {
    const leftToRight = e.from.x <= e.to.x;
    const x1 = e.from.x + (leftToRight ? W : 0), x2 = e.to.x + (leftToRight ? 0 : W);
    const y1 = e.from.y + H / 2, y2 = e.to.y + H / 2;
    const kind = e.negated ? "negated" : e.partial ? "partial" : e.holds ? "holds" : "misses";
    const marker = { negated: "arrow-not", partial: "arrow-partial", holds: "arrow", misses: "arrow-miss" }[kind];
    root.append(svg("line", { x1, y1, x2, y2, class: `edge ${kind}`, "marker-end": `url(#${marker})` }));
    root.append(svg("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, class: `edge-label ${kind}`,
                              "text-anchor": "middle" }, e.label));
  }
  for (const n of model.nodes) {
    const g = svg("g", { class: `node ${n.kind}`, transform: `translate(${n.x},${n.y})` });
    g.append(svg("rect", { width: W, height: H, rx: 6 }));
    const label = svg("text", { x: 8, y: 15, class: "label" });
    const lines = wrap(n.label, 25, 2);
    lines.forEach((line, i) => label.append(svg("tspan", { x: 8, dy: i ? 14 : 0 }, line)));
    const sub = svg("text", { x: 8, y: 15 + 14 * lines.length, class: "sub" });
    wrap(n.sub, 33, 3 - lines.length).forEach((line, i) => sub.append(svg("tspan", { x: 8, dy: i ? 13 : 0 }, line)));
    g.append(label, sub);
    g.append(svg("title", {}, `${n.label}${n.iri ? " <" + n.iri + ">" : ""}\n${n.sub}`));
    root.append(n.iri ? wrapLink(g, n.iri) : g);
  }
  if (model.hidden) {
    root.append(svg("text", { x: PAD, y: height - 8, class: "sub" }, `+ ${model.hidden} more request term(s) not drawn`));
  }
  return root;
}

// A drawn node of the KB opens its own page.
function wrapLink(g, iri) {
  const link = svg("a", { href: nodePage(iri), class: "node-link" });
  link.append(g);
  return link;
}

async function showProvenance(explain, result) {
  const first = provenanceModel(explain, result);
  await fetchLabels([...first.nodes.map((n) => n.iri).filter(Boolean),
                     ...Object.values((explain.support || {})[result.iri] || []).flatMap(
                       (row) => ("term" in row ? [row.ancestor, ...row.annotations] : Object.values(row)))]);
  const model = provenanceModel(explain, result);  // again, now with the names fetched
  const figure = $("provenance-graph");
  if (!model.nodes.length) {  // nothing was read as a path: no graph (an empty one has no size)
    figure.replaceChildren();
    figure.hidden = true;
    return;
  }
  const caption = element("figcaption");
  caption.append(element("strong", result.name), document.createTextNode(
    model.found ? ": the request's constants, the relation path, the answer (solid: paths this answer satisfies)"
                : ": not a structured answer (topped up from the fallback search); the paths it was read as"));
  const open = element("button", "open the SPARQL in the editor", "open-sparql");
  open.type = "button";
  open.id = "provenance-sparql";
  open.disabled = !explain.sparql;
  open.addEventListener("click", () => {
    yasgui.getTab().setQuery(explain.sparql);
    $("sparql-status").textContent = "the SPARQL 4StepFocus compiled for this request: press the run button";
    $("yasgui").scrollIntoView({ block: "center" });
  });
  const unread = (explain.triplets && explain.triplets.unread) || [];
  const left = element("p", unread.length ? `left unread: ${unread.join(", ")}` : "", "unread");
  figure.replaceChildren(caption, drawProvenance(model), ...(unread.length ? [left] : []), open);
  figure.hidden = false;
}

// The SPARQL editor: YASGUI (vendor/), on this server's /sparql, results as a sortable, paged table; the share
// button gives a link with the query in it. The editor never talks to another site: the completers that ask
// Linked Open Vocabularies (properties, classes) and the bundled prefix list (whose bio: is not the KB's) are
// off; prefixes complete from the KB's own (/health), which the server predeclares, and the syntax check knows
// them, so a query that uses bio: without declaring it is not flagged. The endpoint is fixed to this server
// (a function: YASGUI then ignores the endpoint of a shared link or of a stored tab).
const EXAMPLE = `SELECT ?node ?name ?score WHERE {
  SERVICE <urn:kqe:search> {
    ?node kqe:query "seizure" ; kqe:k 10 ; kqe:score ?score .
  }
  ?node rdfs:label ?name .
} ORDER BY DESC(?score)`;
const ENDPOINT = new URL("/sparql", location.href).href;
const KB_PREFIXES = {};  // filled from /health
const Yasqe = Yasgui.Yasqe || window.Yasqe;
const CodeMirror = Object.getPrototypeOf(Yasqe);

// The syntax check's tokenizer starts every query knowing the KB's prefixes.
const sparqlMode = CodeMirror.modes.sparql11;
CodeMirror.defineMode("sparql11", (config, options) => {
  const mode = sparqlMode(config, options);
  const startState = mode.startState;
  mode.startState = (...args) => {
    const state = startState(...args);
    state.prefixes = { ...KB_PREFIXES, ...state.prefixes };
    return state;
  };
  return mode;
});

// Prefix completion ("PREFIX b" offers "bio: <…>"; typing an undeclared "x:" declares it) from the KB's own.
Yasqe.forkAutocompleter("prefixes", {
  name: "kbPrefixes",
  persistenceId: null,
  get: () => Object.entries(KB_PREFIXES).map(([name, iri]) => `${name}: <${iri}>`).sort(),
}, false);
// IRIs and prefixed names complete from the KB (/complete): a relation where a predicate goes ("bio:hasP"), a node
// or a class elsewhere ("bio:Dis"), an IRI by its start ("<http://purl.obolibrary.org/obo/HP_00012"), and a node by
// its name after a "<" ("<seiz" → <http://purl.obolibrary.org/obo/HP_0001250>); the list shows each one's name.
const TERM_NAMES = new Map();
Yasqe.forkAutocompleter("property", {
  name: "kbTerms",
  persistenceId: null,
  bulk: false,
  autoShow: true,
  isValidCompletionPosition: (yasqe) => {
    const text = yasqe.getCompleteToken().string || "";
    const cursor = yasqe.getDoc().getCursor();
    if (/^\s*(PREFIX|BASE)\b/i.test(yasqe.getDoc().getLine(cursor.line))) return false;
    if (text.startsWith("<")) return !text.endsWith(">") && text.length >= 3;
    const pname = /^([A-Za-z][\w.-]*)?:([\w.-]*)$/.exec(text);
    return Boolean(pname && (pname[1] || "") in KB_PREFIXES && pname[2].length >= 1);
  },
  preProcessToken: (_yasqe, token) => token,
  postProcessSuggestion: (_yasqe, _token, suggestion) => suggestion,
  get: async (_yasqe, token) => {
    const possible = (token.state && token.state.possibleCurrent) || [];
    const params = new URLSearchParams({ q: token.string, limit: "15" });
    for (const kind of possible.indexOf("a") >= 0 ? ["relation"] : ["node", "class"]) params.append("kind", kind);
    try {
      const response = await fetch("/complete?" + params.toString(), { headers: { Accept: "application/json" } });
      if (!response.ok) return [];
      return (await response.json()).completions.map((c) => {
        const text = c.prefixed || `<${c.iri}>`;
        TERM_NAMES.set(text, c.name);
        return text;
      });
    } catch (_) {
      return [];
    }
  },
  postprocessHints: (_yasqe, hints) => hints.map((hint) => ({
    ...hint, displayText: TERM_NAMES.has(hint.text) ? `${hint.text}  ${TERM_NAMES.get(hint.text)}` : hint.text })),
}, false);
// Exactly these completers: a list in the config is merged index by index into the defaults, not put in their place.
for (const defaults of [Yasqe.defaults, Yasgui.defaults.yasqe].filter(Boolean)) {
  defaults.autocompleters = ["variables", "kbPrefixes", "kbTerms"];
  defaults.prefixCcApi = null;
}

const yasgui = new Yasgui($("yasgui"), {
  requestConfig: { endpoint: () => ENDPOINT, method: "POST" },
  copyEndpointOnNewTab: false,
  endpointCatalogueOptions: { getData: () => [] },
  persistenceId: null,
  // A shared link brings its query and settings, never its endpoint.
  populateFromUrl: (config) => ({ ...config, requestConfig: { ...config.requestConfig, endpoint: ENDPOINT } }),
  yasqe: { value: EXAMPLE },
});
window.kqeYasgui = yasgui;

// The KB's prefixes, declared in the editor's query (the server predeclares them too), and known to the editor's
// syntax check and prefix completion.
function preloadPrefixes(prefixes) {
  const yasqe = yasgui.getTab().getYasqe();
  // Declared first: once the tokenizer knows them, addPrefixes would take them for declared already.
  if (yasqe && !/^\s*PREFIX/im.test(yasqe.getValue())) yasqe.addPrefixes(prefixes);
  Object.assign(KB_PREFIXES, prefixes);
  if (!yasqe) return;
  yasqe.setOption("mode", "sparql11");  // tokenize again, now with the KB's prefixes
  const completer = yasqe.autocompleters.kbPrefixes;
  if (completer) completer.storeBulkCompletions(completer.config.get());
  yasqe.checkSyntax();
}

async function info() {
  const response = await fetch("/health");
  if (response.ok) {
    const data = await response.json();
    $("kb-info").textContent = `KB ${data.kb}: ${data.nodes} nodes` + (data.embeddings ? ", embedded" : "");
    if (data.examples) showExamples(data.examples);
    if (data.prefixes) preloadPrefixes(data.prefixes);
  }
}

// Examples made from this KB (a class and a node's name, from /health) in place of the page's own, which are
// the bio KB's: the search box's placeholder, the type box's, and the editor's query while it is untouched.
function showExamples(examples) {
  if (examples.node) $("search-text").placeholder = `e.g. ${examples.node}`;
  if (examples.type) $("search-type").placeholder = `any, e.g. ${examples.type}`;
  const yasqe = yasgui.getTab().getYasqe();
  if (examples.node && yasqe && yasqe.getValue().trim() === EXAMPLE) {
    yasqe.setValue(EXAMPLE.replace('"seizure"', JSON.stringify(examples.node)));
  }
}

$("search-form").addEventListener("submit", search);
$("search-previous").addEventListener("click", () => showPage(shownSearch.page - 1));
$("search-next").addEventListener("click", () => showPage(shownSearch.page + 1));

// ---------------------------------------------------------------- names completed in the search box
// The search box completes the name being typed (the last one to three words after a comma or an "and") from
// /complete: the KB's nodes, best first (of the type box's class when there is one). Picking one (a click, or
// the arrow keys and Enter) puts its name in place of those words; Escape closes the list.
const suggestions = { items: [], active: -1, asked: 0, timer: null };

// The text's last three, two and one words (after its last separator), each with where it starts.
function typedFragments(text) {
  if (/\s$/.test(text)) return [];
  const separators = [...text.matchAll(/[,;]|\b(?:and|with|or|plus)\b/gi)];
  const tail = separators.length ? separators[separators.length - 1].index + separators[separators.length - 1][0].length : 0;
  const words = [...text.slice(tail).matchAll(/\S+/g)].map((m) => tail + m.index);
  const out = [];
  for (let n = Math.min(3, words.length); n >= 1; n -= 1) {
    const start = words[words.length - n];
    out.push({ text: text.slice(start), start });
  }
  return out.filter((f) => f.text.replace(/[^\p{L}\p{N}]/gu, "").length >= 2);
}

async function completionsOf(fragment, type) {
  const params = new URLSearchParams({ q: fragment, kind: "node", limit: "8" });
  if (type) params.append("class", type);
  try {
    const response = await fetch("/complete?" + params.toString(), { headers: { Accept: "application/json" } });
    return response.ok ? (await response.json()).completions : [];
  } catch (_) {
    return [];
  }
}

async function suggest() {
  const asked = ++suggestions.asked;
  const text = $("search-text").value;
  const fragments = typedFragments(text);
  const answers = await Promise.all(fragments.map((f) => completionsOf(f.text, $("search-type").value.trim())));
  if (asked !== suggestions.asked) return;  // the text changed meanwhile: a newer request answers
  // the longest words that start a name (or a word of one); else the longest that are inside one
  let chosen = answers.findIndex((found) => found.some((c) => c.how !== "contains"));
  if (chosen < 0) chosen = answers.findIndex((found) => found.length);
  if (chosen < 0) return closeSuggestions();
  const fragment = fragments[chosen];
  suggestions.items = answers[chosen].map((c) => ({ ...c, before: text.slice(0, fragment.start) }));
  suggestions.active = -1;
  $("search-suggestions").replaceChildren(...suggestions.items.map((c, i) => {
    const option = element("li", undefined, "suggestion");
    option.id = `suggestion-${i}`;
    option.setAttribute("role", "option");
    option.append(element("span", c.name, "name"), element("span", c.types.join(", "), "types"));
    if (c.matched && c.matched !== c.name.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").trim()) {
      option.append(element("span", `(${c.matched})`, "matched"));
    }
    option.addEventListener("mousedown", (event) => { event.preventDefault(); pickSuggestion(i); });
    return option;
  }));
  $("search-suggestions").hidden = false;
  $("search-text").setAttribute("aria-expanded", "true");
}

function pickSuggestion(i) {
  const picked = suggestions.items[i];
  if (!picked) return;
  $("search-text").value = picked.before + picked.name;
  closeSuggestions();
  $("search-text").focus();
}

function closeSuggestions() {
  suggestions.asked += 1;  // an answer still on its way is not shown
  suggestions.items = [];
  suggestions.active = -1;
  $("search-suggestions").replaceChildren();
  $("search-suggestions").hidden = true;
  $("search-text").setAttribute("aria-expanded", "false");
  $("search-text").removeAttribute("aria-activedescendant");
}

function moveSuggestion(step) {
  const count = suggestions.items.length;
  let next = suggestions.active + step;  // -1: the text as typed
  if (next < -1) next = count - 1;
  if (next >= count) next = -1;
  suggestions.active = next;
  [...$("search-suggestions").children].forEach((li, i) => li.classList.toggle("active", i === suggestions.active));
  if (suggestions.active >= 0) $("search-text").setAttribute("aria-activedescendant", `suggestion-${suggestions.active}`);
  else $("search-text").removeAttribute("aria-activedescendant");
}

$("search-text").addEventListener("input", () => {
  clearTimeout(suggestions.timer);
  suggestions.timer = setTimeout(suggest, 80);
});
$("search-text").addEventListener("keydown", (event) => {
  if ($("search-suggestions").hidden) return;
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    moveSuggestion(event.key === "ArrowDown" ? 1 : -1);
  } else if (event.key === "Enter" && suggestions.active >= 0) {
    event.preventDefault();  // a pick, not a search
    pickSuggestion(suggestions.active);
  } else if (event.key === "Escape") {
    closeSuggestions();
  }
});
$("search-text").addEventListener("blur", () => setTimeout(closeSuggestions, 100));

// An IRI in the SPARQL table opens its node page on this server (which sends an IRI the KB holds no fact about on
// to itself): the link is pointed there as it is followed, so YASR's table and its sorting stay as they are.
$("yasgui").addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest(".yasr a[href]");
  if (!link || link.dataset.iri || !isWebLink(link.getAttribute("href"))) return;
  link.dataset.iri = link.getAttribute("href");
  link.href = nodePage(link.dataset.iri);
}, true);
info();

// A link with a search in its fragment (#q=…&method=…&k=…&type=…) runs that search when opened.
function searchFromLink() {
  const shared = new URLSearchParams(SHARED_SEARCH);
  if (!shared.get("q")) return;
  $("search-text").value = shared.get("q");
  if (shared.get("k")) $("search-k").value = shared.get("k");
  if (shared.get("type")) $("search-type").value = shared.get("type");
  const method = shared.get("method");
  if (method && [...$("search-method").options].some((o) => o.value === method)) $("search-method").value = method;
  $("search-form").requestSubmit();
}

// The method list comes from the server's method registry (/openapi.json); the page's own list stays when
// that cannot be read.
async function loadMethods() {
  try {
    const response = await fetch("/openapi.json");
    const spec = await response.json();
    const param = (spec.paths["/search"].get.parameters || []).find((p) => p.name === "method");
    const names = param && param.schema && param.schema.enum;
    if (!Array.isArray(names) || !names.length) return;
    const select = $("search-method");
    const current = select.value;
    select.replaceChildren(...names.map((name) => {
      const option = element("option", name);
      option.value = name;
      return option;
    }));
    select.value = names.includes(current) ? current : names[0];
  } catch (_) {
    // keep the built-in list
  }
}

loadMethods().then(searchFromLink);
