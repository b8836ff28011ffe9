// mad-eval view: the pages of a static site written by `mad-eval view`.
// Data comes as scripts (data/*.js) that call MADV.loaded(name, value): file:// pages
// cannot fetch(). Every text from a run is inserted as text (textContent), never as HTML;
// the exceptions are what Python rendered and escaped (text_html, reasoning_html: Markdown
// with raw HTML off; a question's text_html), whose formulas sit as escaped text in
// <span class="math">. KaTeX (assets/katex, 0.19.1) typesets those spans' text with trust
// off, so \href, \url, \htmlClass and the like render as plain red text, never as links.
// Only the data files that the index lists are ever loaded: a route names a key of that
// index, never a path, so no URL can make the page run another file.
"use strict";

const MADV = (window.MADV = { cache: new Map(), waiting: new Map() });
const PAGE = 100; // rows per page of a list
const FILES = new Map([["index", "data/index.js"]]); // data file by name, as Python wrote them
const DATA_FILE = /^data\/\d+\/\d+\.js$/; // the only shape a debate's file has

class NotFound extends Error {}

MADV.loaded = function (name, value) {
  if (!FILES.has(name)) return;
  MADV.cache.set(name, value);
  const waiting = MADV.waiting.get(name) || [];
  MADV.waiting.delete(name);
  waiting.forEach((w) => w.resolve(value));
};

// The data file named `name` in the index (its value once loaded); a name the index does
// not list is not found, and nothing is loaded for it.
function load(name) {
  const src = FILES.get(name);
  if (src === undefined) return Promise.reject(new NotFound(name));
  if (MADV.cache.has(name)) return Promise.resolve(MADV.cache.get(name));
  return new Promise((resolve, reject) => {
    const first = !MADV.waiting.has(name);
    if (first) MADV.waiting.set(name, []);
    MADV.waiting.get(name).push({ resolve, reject });
    if (!first) return;
    const script = document.createElement("script");
    script.src = src;
    script.onerror = () => {
      const waiting = MADV.waiting.get(name) || [];
      MADV.waiting.delete(name);
      script.remove();
      waiting.forEach((w) => w.reject(new Error("cannot load " + src)));
    };
    document.head.appendChild(script);
  });
}

// An element: attributes by name (class, id, title, data-*, on*: functions), then children
// (strings become text nodes, never HTML).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

// KaTeX's settings: no command that makes links, classes, styles or images (trust), bounded
// macro expansion and sizes, errors shown as red source instead of thrown.
const KATEX = { throwOnError: false, trust: false, strict: "ignore", maxExpand: 500, maxSize: 20,
  output: "htmlAndMathml" };

// Typeset every math span under `root` (KaTeX missing: they stay as their TeX source).
function typeset(root) {
  if (!window.katex || !root) return;
  root.querySelectorAll("span.math:not(.typeset)").forEach((span) => {
    const tex = span.textContent;
    try {
      window.katex.render(tex, span, { ...KATEX, macros: {}, displayMode: span.classList.contains("display") });
      span.classList.add("typeset");
    } catch (err) {
      span.textContent = tex;
    }
  });
}

// An answer or gold as an element: a formula when the benchmark's answers are LaTeX.
function answerEl(text, kind, attrs) {
  const math = kind === "math" && text !== null && text !== undefined && text !== "";
  return el("span", { ...(attrs || {}), class: ((attrs || {}).class || "") + (math ? " math inline" : "") }, text);
}

const fmt = (x, digits = 1) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const mark = (v) => (v === true ? "✓" : v === false ? "✗" : "–");
const markClass = (v) => (v === true ? "right" : v === false ? "wrong" : "none");

let INDEX = null;
const state = { run: 0, tags: new Set(), search: "", below: "", sort: "question", desc: false, page: 0,
  a: 0, b: 1, compare: "differ", cpage: 0, columns: "all" };
let NAV = null; // the open debate's previous and next routes (keys ← → and p n), or null

function app() { return document.getElementById("app"); }
function show(...nodes) { put(app(), ...nodes); }
function put(holder, ...nodes) {
  holder.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  typeset(holder);
}
function where(text) { document.getElementById("where").textContent = text; }

// ---- overview -------------------------------------------------------------------------

function runsTable() {
  const rows = INDEX.runs.map((run, i) => {
    const s = run.summary;
    return el("tr", { "data-run": i },
      el("td", { class: "label" }, el("a", { href: "#/run/" + i }, run.label),
        alertsOf(run).length ? el("span", { class: "alert-mark", title: alertsOf(run).join("\n") }, " ⚠ " + alertsOf(run).length) : null),
      el("td", {}, run.method), el("td", {}, run.benchmark), el("td", {}, String(run.agents)), el("td", {}, String(run.rounds)),
      el("td", {}, run.rule),
      ["maj", "debate", "delta"].map((name) => headlineCell(s, name)),
      el("td", {}, s.rounds.map((r) => fmt(r.vote_accuracy)).join(" → ")),
      el("td", {}, s.transitions.map((t) => "C→I " + fmt(t.c2i) + " / I→C " + fmt(t.i2c)).join("; ")),
      el("td", { class: "num" }, String(run.debates.length)));
  });
  return el("div", { class: "wide" }, el("table", { id: "runs", class: "runs" },
    el("thead", {}, el("tr", {}, ["run", "settings", "benchmark", "N", "T", "rule", "Maj", "Debate", "Δ",
      "vote accuracy by round", "transitions (% of agents)", "debates"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows)));
}

// Maj, Debate or Δ: the mean over seeded runs ± their std (one run: no ±), and below it
// the 95% bootstrap interval over questions.
function headlineCell(s, name) {
  const value = s[name], std = s[name + "_std"], ci = s[name + "_ci"];
  const signed = name === "delta" && value !== null && value !== undefined && value > 0 ? "+" : "";
  const spread = std !== null && std !== undefined ? " ± " + fmt(std) : "";
  const interval = ci && ci[0] !== null && ci[1] !== null ? "[" + fmt(ci[0]) + ", " + fmt(ci[1]) + "]" : null;
  const title = (spread ? "mean ± std over " + s.runs + " seeded runs" : "one seeded run") +
    (interval ? "; 95% bootstrap interval over questions " + interval : "");
  return el("td", { class: "num", "data-field": name, "data-value": value, title },
    el("span", { class: "value" }, signed + fmt(value) + spread),
    interval ? el("div", { class: "ci" }, interval) : null);
}

// What the overview's marks and numbers mean.
function overviewLegend() {
  return el("details", { class: "legend small", id: "overview-legend" }, el("summary", {}, "What the marks mean"),
    el("ul", {},
      el("li", {}, "Maj, Debate, Δ: the vote before debate (round 0), after the last round, and their difference, in %; " +
        "± is the std over seeded runs (none with one run), [a, b] the 95% bootstrap interval over questions."),
      el("li", {}, "Votes by round: ", el("span", { class: "vote right" }, "✓"), " right, ", el("span", { class: "vote wrong" }, "✗"),
        " wrong, ", el("span", { class: "vote none" }, "–"), " no vote; ", el("span", { class: "vote right tied" }, "✓"),
        " (dotted) a tie the seeded draw broke (hover for the tie)."),
      el("li", {}, "⚠ the run has alerts: numbers that are probably not what they seem."),
      el("li", {}, "Seeded runs of one question are listed together under it, one row each.")));
}

// A run's alerts (metrics.json's "alerts": one sentence each); none for older runs.
function alertsOf(run) { return Array.isArray(run.alerts) ? run.alerts : []; }

function alertsBox(run, folded) {
  const alerts = alertsOf(run);
  if (!alerts.length) return null;
  const list = el("ul", {}, alerts.map((a) => el("li", {}, a)));
  const title = "⚠ " + (alerts.length === 1 ? "An alert" : alerts.length + " alerts") + " about " + run.label;
  if (folded) return el("details", { class: "alerts", id: "alerts" }, el("summary", {}, title), list);
  return el("div", { class: "alerts", id: "alerts", role: "alert" }, el("strong", {}, title), list);
}

function roundsDetail(run) {
  const s = run.summary;
  return el("details", { class: "rounds" }, el("summary", {}, "By round: " + (run.label)),
    el("table", {}, el("thead", {}, el("tr", {}, ["round", "vote accuracy", "agent accuracy", "unanimous"]
      .map((h) => el("th", {}, h)))),
    el("tbody", {}, s.rounds.map((r) => el("tr", {}, el("td", {}, String(r.round)),
      el("td", { class: "num" }, fmt(r.vote_accuracy)), el("td", { class: "num" }, fmt(r.agent_accuracy)),
      el("td", { class: "num" }, fmt(r.unanimous)))))),
    s.transitions.length ? el("table", {}, el("thead", {}, el("tr", {}, ["rounds", "C→I", "I→C", "Δ"]
      .map((h) => el("th", {}, h)))),
    el("tbody", {}, s.transitions.map((t) => el("tr", {}, el("td", {}, t.from_round + "→" + t.to_round),
      el("td", { class: "num" }, fmt(t.c2i)), el("td", { class: "num" }, fmt(t.i2c)),
      el("td", { class: "num" }, fmt(t.delta)))))) : null);
}

// A debate's question as the list shows it: its first characters, formulas typeset.
function snippet(d) {
  const cell = el("td", { class: "text", title: d.text });
  if (typeof d.text_html === "string") cell.innerHTML = d.text_html; // Python-escaped, math spans
  else cell.textContent = d.text;
  return cell;
}

function filtered(run) {
  const needle = state.search.trim().toLowerCase();
  const below = state.below === "" ? null : Number(state.below);
  let rows = run.debates.filter((d) => {
    for (const t of state.tags) if (!d.tags.includes(t)) return false;
    if (below !== null && !(d.critique_min !== null && d.critique_min < below)) return false;
    if (needle && !(d.question + " " + d.text + " " + (d.gold || "") + " " + d.search)
      .toLowerCase().includes(needle)) return false;
    return true;
  });
  if (state.sort !== "question") { // the index lists debates in question order
    const key = state.sort;
    const sign = state.desc ? -1 : 1;
    rows = rows.slice().sort((x, y) => {
      const a = x[key], b = y[key];
      if (a === null || a === undefined) return b === null || b === undefined ? 0 : 1;
      if (b === null || b === undefined) return -1;
      return sign * (a - b);
    });
  }
  return rows;
}

function controls(run, redraw) {
  const tags = Object.entries(INDEX.tags).map(([tag, label]) => el("label", { class: "tag" },
    el("input", { type: "checkbox", id: "filter-" + tag, checked: state.tags.has(tag),
      onchange: (e) => { e.target.checked ? state.tags.add(tag) : state.tags.delete(tag); state.page = 0; redraw(); } }),
    " " + label));
  const search = el("input", { type: "search", id: "search", placeholder: "search question and answers",
    value: state.search, oninput: (e) => { state.search = e.target.value; state.page = 0; redraw(); } });
  const below = el("input", { type: "number", id: "below", min: 0, step: 1, value: state.below,
    placeholder: "judge total below", disabled: !run.judged,
    oninput: (e) => { state.below = e.target.value; state.page = 0; redraw(); } });
  const sort = el("select", { id: "sort", onchange: (e) => { state.sort = e.target.value; redraw(); } },
    [["question", "question"], ["done", "completion order"], ["agreement", "agreement (last round)"], ["tokens", "tokens generated"],
      ["critique", "critique score"]].map(([v, t]) => el("option", { value: v, selected: state.sort === v }, t)));
  const desc = el("label", {}, el("input", { type: "checkbox", id: "desc", checked: state.desc,
    onchange: (e) => { state.desc = e.target.checked; redraw(); } }), " descending");
  return el("div", { class: "controls" }, el("div", { class: "tags" }, tags),
    el("div", {}, search, " ", below, " sort by ", sort, " ", desc));
}

// Rows of one question's seeded runs, listed together (in question order only): the number
// of rows of its group that follow row k when k starts one, 0 when row k continues one.
function grouped(rows, k) {
  if (state.sort !== "question" || (k > 0 && rows[k - 1].question === rows[k].question)) return 0;
  let n = 1;
  while (k + n < rows.length && rows[k + n].question === rows[k].question) n++;
  return n;
}

// A list row's question, text and gold (spanning its group's rows; none on a row that
// continues a group) and, where the run has seeded runs, the row's seed.
function questionCells(rows, k, kind, route, seeded) {
  const d = rows[k], span = grouped(rows, k);
  const seed = seeded ? el("td", { class: "seed num", title: "seeded run " + d.seed_run }, "seed " + d.seed_run) : null;
  if (span === 0 && state.sort === "question") return [seed];
  const rowspan = span > 1 ? span : null;
  const text = snippet(d);
  if (rowspan) text.setAttribute("rowspan", rowspan);
  return [el("td", { class: "qid", rowspan }, el("a", { href: route }, d.question)), text,
    el("td", { rowspan }, answerEl(d.gold, kind)), seed];
}

// A debate's votes by round as marks, a tie the seeded draw broke dotted, its tie in the title.
function voteMarks(d) {
  const ties = d.ties || [];
  return d.votes.map((v, r) => el("span", { class: "vote " + markClass(v) + (ties[r] ? " tied" : ""),
    title: "round " + r + ": " + (d.answers[r] === null ? "no answer" : d.answers[r]) + (ties[r] ? " (" + ties[r] + ")" : "") }, mark(v)));
}

function debateList(i) {
  const run = INDEX.runs[i];
  const holder = el("div", { id: "list" });
  const redraw = () => {
    const rows = filtered(run);
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const shown = rows.slice(state.page * PAGE, (state.page + 1) * PAGE);
    const rounds = run.rounds;
    const seeded = run.debates.some((d) => d.seed_run);
    const body = el("tbody", { id: "rows" }, shown.map((d, k) => el("tr", { "data-key": d.key,
      class: "row" + (seeded && grouped(shown, k) > 0 ? " group-start" : ""), onclick: () => { location.hash = "#/q/" + d.file; } },
      questionCells(shown, k, run.kind, "#/q/" + d.file, seeded),
      el("td", { class: "votes" }, voteMarks(d)),
      el("td", {}, d.tags.map((t) => el("span", { class: "chip" }, t))),
      el("td", { class: "num" }, fmt(d.agreement === null ? null : 100 * d.agreement, 0)),
      el("td", { class: "num" }, String(d.tokens)),
      el("td", { class: "num" }, fmt(d.critique)))));
    const pager = el("div", { class: "pager" },
      el("button", { id: "prev", disabled: state.page === 0, onclick: () => { state.page--; redraw(); } }, "‹ prev"),
      el("span", { id: "count" }, " " + rows.length + " of " + run.debates.length + " debates, page " +
        (state.page + 1) + " of " + pages + " "),
      el("button", { id: "next", disabled: state.page >= pages - 1, onclick: () => { state.page++; redraw(); } }, "next ›"));
    put(holder, controls(run, redraw), pager,
      el("div", { class: "wide" }, el("table", { class: "list" }, el("thead", {}, el("tr", {}, ["question", "text", "gold",
        seeded ? "seed" : null, "vote by round (0.." + rounds + ")", "tags", "agree %", "tokens", "critique"]
        .filter((h) => h !== null).map((h) => el("th", {}, h)))), body)));
    const focus = document.getElementById("search");
    if (focus && state.search) { focus.focus(); focus.setSelectionRange(state.search.length, state.search.length); }
  };
  redraw();
  return holder;
}

function overview(i) {
  if (i !== state.run) { state.run = i; state.page = 0; }
  const run = INDEX.runs[i];
  where(INDEX.runs.length > 1 ? "" : run.label);
  const tabs = INDEX.runs.length > 1 ? el("nav", { class: "tabs" },
    INDEX.runs.map((r, j) => el("a", { href: "#/run/" + j, class: j === i ? "on" : "" }, r.label)),
    el("a", { href: "#/compare", id: "compare-link" }, "side by side")) : null;
  show(alertsBox(run, false), runsTable(), overviewLegend(), el("div", { class: "rounds-all" }, INDEX.runs.map(roundsDetail)),
    run.questions_note ? el("p", { class: "note" }, run.questions_note) : null,
    tabs, el("h2", {}, "Debates of " + (run.label)), debateList(i));
}

// ---- a debate -------------------------------------------------------------------------

// Who the agents of round r read, said once for the round only where the reading is
// complete ("all 5", "the other 4"); else null, and each cell says whom its agent read.
function readsOfRound(page, r) {
  const turns = page.turns.filter((t) => t.round === r);
  if (r === 0 || !turns.length) return null;
  const all = Array.from({ length: page.agents }, (_, a) => a).join(",");
  const key = (t) => t.sees.slice().sort((x, y) => x - y).join(",");
  if (turns.every((t) => key(t) === all)) return "all " + page.agents;
  if (turns.every((t) => key(t) === all.split(",").filter((a) => Number(a) !== t.agent).join(",")))
    return "the other " + (page.agents - 1);
  return null;
}

// Whom one agent read ("read agents 1, 4", "read agent 3", "read nobody").
function readText(t) {
  const seen = t.sees.slice().sort((x, y) => x - y);
  return "read " + (seen.length === 0 ? "nobody" : (seen.length === 1 ? "agent " : "agents ") + seen.join(", "));
}

// How a turn's answer stands in its round: "minority" (differs from the round's most common
// answer), "split" (no answer is the most common), or "" (with it, or no answer).
function standing(t, page) {
  if (t.group === null || t.group === undefined) return "";
  if (!page.majority[t.round]) return "split";
  return t.group > 0 ? "minority" : "";
}
const STANDING = { minority: "≠ most common", split: "no most common answer" };

// An agent's role names over the rounds ("judge"; "critic/summarizer"), or "".
function roleOf(page, a) {
  const names = (page.roles || []).map((row) => row[a]).filter((n) => n);
  return Array.from(new Set(names)).join("/");
}

// What a reply stated besides its answer ("verdict: end", "confidence: 0.83").
function statedText(stated) {
  return Object.entries(stated || {}).map(([k, v]) => k + ": " + (v === null ? "unreadable"
    : Array.isArray(v) ? v.map((x) => Array.isArray(x) ? x.join(" = ") : x).join("; ")
    : typeof v === "number" ? fmt(v, 2) : String(v)));
}

function endedCell(page, r) {
  return el("td", { class: "cell ended", title: "the debate ended after round " + page.stop.round + " (" +
    page.stop.why + "); its answers there count in this round" }, "ended");
}

function grid(page, run, pick, prefix) {
  const byCell = {};
  page.turns.forEach((t) => { byCell[t.agent + "/" + t.round] = t; });
  const reads = Array.from({ length: page.rounds + 1 }, (_, r) => readsOfRound(page, r));
  const head = el("tr", {}, el("th", {}, "agent"),
    Array.from({ length: page.rounds + 1 }, (_, r) => el("th", { class: "round-head", "data-round": r,
      onclick: () => pick(r, null) }, "round " + r,
      reads[r] ? el("div", { class: "sees", id: prefix + "reads-" + r, title: "every agent of round " + r +
        " read " + reads[r] + " of round " + (r - 1) }, "each read " + reads[r]) : null)));
  const rows = [];
  for (let a = 0; a < page.agents; a++) {
    const cells = [];
    for (let r = 0; r <= page.rounds; r++) {
      const t = byCell[a + "/" + r];
      if (!t && page.stop && r > page.stop.round) { cells.push(endedCell(page, r)); continue; }
      if (!t) { cells.push(el("td", { class: "cell missing" }, "not recorded")); continue; }
      const stand = standing(t, page);
      cells.push(el("td", { class: "cell " + t.class + (t.changed ? " changed" : "") + (stand ? " " + stand : ""),
        id: prefix + "cell-" + a + "-" + r, "data-agent": a, "data-round": r, "data-class": t.class,
        title: t.class + (t.changed ? ", changed its answer" : "") + (stand ? ", " + STANDING[stand] : ""),
        onclick: () => pick(r, a) },
        t.error ? el("span", { class: "answer" }, "failed") : t.answer === null ? el("span", { class: "answer" }, "unparsed")
          : answerEl(t.answer, run.kind, { class: "answer" }),
        stand === "minority" ? el("span", { class: "minority-mark", title: STANDING.minority }, " ≠") : null,
        t.changed ? el("span", { class: "changed-mark", title: "changed its answer" }, " ↻") : null,
        t.truncated ? el("span", { class: "trunc", title: "cut off at the token limit" }, " ✂") : null,
        !reads[r] && r > 0 ? el("div", { class: "sees reads", title: "agent " + a + " " + readText(t) +
          " of round " + (r - 1) }, readText(t)) : null));
    }
    const role = roleOf(page, a);
    rows.push(el("tr", {}, el("th", {}, "agent " + a + (a === page.hub ? " (hub)" : "") +
      (page.voters.includes(a) ? "" : " (no vote)"), role ? el("div", { class: "role" }, role) : null), cells));
  }
  const ties = page.ties || [];
  rows.push(el("tr", { class: "vote-row" }, el("th", {}, "vote"),
    page.votes.map((v, r) => el("td", { class: "vote " + markClass(v), "data-round": r, id: prefix + "vote-" + r,
      title: ties[r] || null },
      mark(v) + " ", page.answers[r] === null ? null : answerEl(page.answers[r], run.kind),
      ties[r] ? el("span", { class: "tie-mark", title: ties[r] }, " ⚖ tie") : null))));
  return el("div", { class: "wide" }, el("table", { class: "grid" }, el("thead", {}, head), el("tbody", {}, rows)));
}

function textBlock(title, text, html, id) {
  if (text === null || text === undefined) return null;
  const raw = el("pre", { class: "raw", id: id + "-raw" }, text);
  if (!html) return el("section", {}, title ? el("h4", {}, title) : null, raw);
  const rendered = el("div", { class: "markdown", id: id + "-rendered" });
  rendered.innerHTML = html; // Python's markdown-it output: raw HTML, images and unsafe links off
  raw.hidden = true;
  const toggle = el("button", { class: "toggle", id: id + "-toggle", onclick: () => {
    raw.hidden = !raw.hidden; rendered.hidden = !rendered.hidden;
    toggle.textContent = raw.hidden ? "raw text" : "rendered";
  } }, "raw text");
  return el("section", {}, el("div", { class: "block-head" }, title ? el("h4", {}, title) : null, toggle), rendered, raw);
}

// What else is known of a turn: its numbers, the judge's verdict and the prompt it was sent.
function turnDetails(t, prefix) {
  const meta = [["model", t.model], ["seed", t.seed], ["finish", t.finish_reason],
    ["prompt tokens", t.prompt_tokens], ["completion tokens", t.completion_tokens],
    ["reasoning tokens", t.reasoning_tokens], ["latency (s)", fmt(t.latency, 3)],
    ["options shown", t.option_order ? t.option_order.map((i) => String.fromCharCode(65 + i)).join(" ") : null],
    ["correct", t.correct === null ? "–" : String(t.correct)], ["error", t.error]]
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, String(v))));
  let verdict = null;
  if (t.verdict) {
    const v = t.verdict;
    verdict = el("section", { class: "verdict" }, el("h4", {}, "Judge" + (v.judge ? " (" + v.judge + ")" : "")),
      v.scores ? el("table", {}, el("tbody", {}, Object.entries(v.scores).map(([k, s]) =>
        el("tr", {}, el("th", {}, k), el("td", {}, String(s)))),
        el("tr", {}, el("th", {}, "total"), el("td", { class: "total" }, String(v.total))))) : null,
      v.failure ? el("p", {}, "No usable verdict: " + v.failure) : null,
      v.error ? el("p", {}, "The judge's request failed: " + v.error) : null,
      (v.raw || []).map((r, i) => el("details", {}, el("summary", {}, "judge's answer " + (i + 1)), el("pre", { class: "raw" }, r))));
  }
  let prompt;
  if (t.prompt) {
    prompt = el("details", { class: "prompt" }, el("summary", {}, "The prompt it was sent (" + t.prompt.length + (t.prompt.length === 1 ? " message" : " messages") + ", rebuilt and checked against its hash)"),
      t.prompt.map((m) => el("div", { class: "message" }, el("div", { class: "role" }, m.role), el("pre", { class: "raw" }, m.content))));
  } else {
    prompt = el("p", { class: "note prompt-note" }, t.prompt_note || "The prompt is not available.");
  }
  return el("div", { class: "turn-details", id: prefix + "details" },
    el("table", { class: "meta" }, el("tbody", {}, meta)), verdict, prompt);
}

// One reply as a card: who wrote it, its answer (marked where it differs from the round's
// most common one), the reply (scrolling inside the card), its reasoning and details.
function card(t, page, run, prefix) {
  const id = prefix + "a" + t.agent;
  const stand = standing(t, page);
  const answer = t.error ? "failed" : t.answer === null ? "unparsed" : null;
  const details = el("details", { class: "more" }, el("summary", {}, "details, judge and prompt"));
  details.addEventListener("toggle", () => { if (details.open && details.children.length === 1) details.appendChild(turnDetails(t, id + "-")); });
  return el("article", { class: "card " + t.class + (stand ? " " + stand : ""), id: prefix + "card-" + t.agent,
    "data-agent": t.agent, "data-round": t.round, "data-class": t.class },
    el("header", { class: "card-head" },
      el("span", { class: "who" }, "agent " + t.agent + (t.agent === page.hub ? " (hub)" : "")),
      answer ? el("span", { class: "chip-answer none" }, answer)
        : el("mark", { class: "chip-answer g" + Math.min(t.group, 5), title: "extracted answer" }, answerEl(t.answer, run.kind)),
      stand === "minority" ? el("span", { class: "standing minority" }, STANDING.minority) : null,
      t.changed ? el("span", { class: "changed-mark", title: "changed its answer since the last round" }, "↻ changed") : null,
      t.truncated ? el("span", { class: "trunc", title: "cut off at the token limit" }, "✂ cut off") : null,
      t.verdict && t.verdict.total !== null && t.verdict.total !== undefined ? el("span", { class: "small" }, "judge " + t.verdict.total) : null,
      page.roles && page.roles[t.round] && page.roles[t.round][t.agent] ? el("span", { class: "role" }, page.roles[t.round][t.agent]) : null,
      statedText(t.stated).map((s) => el("span", { class: "stated", title: "what the reply states besides its answer" }, s))),
    el("div", { class: "card-body" },
      t.error ? el("p", { class: "note" }, "The request failed: " + t.error) : null,
      textBlock(null, t.text, t.text_html, id + "-reply"),
      t.reasoning ? el("details", { class: "reasoning" }, el("summary", {}, "reasoning" + (t.reasoning_tokens ? " (" + t.reasoning_tokens + " tokens)" : "")),
        textBlock(null, t.reasoning, t.reasoning_html, id + "-reasoning")) : null),
    details);
}

// A round's line above its replies: its vote and who read whom.
function roundLine(page, run, r) {
  const reads = readsOfRound(page, r);
  let who = null;
  if (r > 0) {
    who = reads ? "Each agent read " + reads + " of round " + (r - 1) + "."
      : "Whom each agent read of round " + (r - 1) + ": " + page.turns.filter((t) => t.round === r)
        .map((t) => "agent " + t.agent + " " + readText(t)).join("; ") + ".";
  }
  const waves = (page.waves || [])[r];
  const order = waves && waves.length > 1 ? "Spoke in order: " + waves.map((w) => w.join(" & ")).join(" → ") + "." : null;
  const ended = page.stop && r > page.stop.round;
  const v = page.votes[r];
  return el("p", { class: "round-line", id: "round-line" }, el("strong", {}, "Round " + r + ". "),
    ended ? el("span", { class: "ended" }, "The debate ended after round " + page.stop.round + "; its answers there count here. ") : null,
    run.voted ? el("span", { class: "vote " + markClass(v) }, "vote " + mark(v)) : null, " ",
    page.answers[r] === null ? null : answerEl(page.answers[r], run.kind), " ",
    (page.ties || [])[r] ? el("span", { class: "tie-mark" }, "⚖ " + page.ties[r] + ". ") : null,
    page.majority[r] ? null : el("span", { class: "standing split" }, "no most common answer"), " ", ended ? null : who, " ", ended ? null : order);
}

// A debate: its grid of answers, then one round's replies side by side (all: every agent of
// the picked round; else only the picked reply, as runs side by side show it).
function debatePanel(page, run, prefix, label, all) {
  const body = el("div", { class: "round-view", id: prefix + "round-view" });
  const chosen = { round: all ? 0 : null, agent: null };
  const pick = (r, a) => {
    if (!all && a === null) return; // runs side by side show one reply a panel, from a cell
    chosen.round = r; chosen.agent = a;
    document.querySelectorAll("#" + prefix + "grid .cell.picked").forEach((c) => c.classList.remove("picked"));
    const cell = a === null ? null : document.getElementById(prefix + "cell-" + a + "-" + r);
    if (cell) cell.classList.add("picked");
    draw();
    const target = a === null ? null : document.getElementById(prefix + "card-" + a);
    if (target && target.scrollIntoView) target.scrollIntoView({ block: "nearest", inline: "nearest" });
  };
  const draw = () => {
    if (chosen.round === null) { put(body); return; }
    const r = chosen.round;
    const turns = page.turns.filter((t) => t.round === r && (all || t.agent === chosen.agent));
    const columns = el("select", { id: prefix + "columns", title: "replies per row",
      onchange: (e) => { state.columns = e.target.value; draw(); } },
      [["all", "replies side by side"], ["2", "two per row"], ["1", "one per row"]]
        .map(([v, text]) => el("option", { value: v, selected: state.columns === v }, text)));
    const tabs = all ? el("nav", { class: "round-tabs" }, Array.from({ length: page.rounds + 1 }, (_, i) =>
      el("button", { class: i === r ? "on" : "", id: prefix + "round-" + i, onclick: () => pick(i, null) }, "round " + i)),
      columns) : null;
    put(body, tabs, all ? roundLine(page, run, r) : null,
      el("div", { class: !all ? "cards one" : "cards per-" + state.columns }, turns.map((t) => {
        const c = card(t, page, run, prefix);
        if (t.agent === chosen.agent) c.classList.add("picked");
        return c;
      })));
  };
  const legend = debateLegend(all, prefix);
  const stopNote = page.stop ? el("p", { class: "stop-note", id: prefix + "stop" }, "Ended after round " +
    page.stop.round + ": " + page.stop.why + ". Later rounds count round " + page.stop.round + "'s answers.") : null;
  const panel = el("div", { class: "panel", id: prefix + "panel" }, label ? el("h3", {}, label) : null,
    stopNote, el("div", { id: prefix + "grid" }, grid(page, run, pick, prefix)), legend, body);
  draw();
  return panel;
}

// Every mark, colour and bar of a debate's grid and cards.
function debateLegend(all, prefix) {
  const sw = (cls, text) => el("span", { class: "swatch " + cls }, text);
  return el("details", { class: "small legend", id: prefix + "legend" },
    el("summary", {}, "Green right, red wrong, yellow unparsed, grey failed; ≠ not the most common answer, ↻ changed, " +
      "✂ cut off, ⚖ a tie the seeded draw broke. " + (all ? "Click a cell or a round to read its replies." : "Click a cell to read its reply.") +
      " More on each colour and mark"),
    el("ul", {},
      el("li", {}, "Cells and the bar atop a reply: ", sw("cell right", "right"), " ", sw("cell wrong", "wrong"), " ",
        sw("cell unparsed", "unparsed"), " (no answer read) ", sw("cell failed", "failed"), " (the request failed) ",
        sw("cell scored", "scored"), " (a summary: scored, not voted) ", sw("cell ended", "ended"), " (the debate stopped earlier)."),
      el("li", {}, sw("cell changed", "purple bar"), " at a cell's left and ↻: the agent changed its answer since the last round."),
      el("li", {}, sw("cell minority", "dashed orange"), " and ≠: the answer differs from the round's most common one; ",
        sw("cell picked", "blue outline"), ": the reply shown below."),
      el("li", {}, "The bar at the left of an answer chip is its answer group in the round: ",
        ["most common", "2nd", "3rd", "4th", "5th", "6th or later"].map((t, g) => el("mark", { class: "chip-answer g" + g }, t))),
      el("li", {}, "✂ cut off at the token limit; under a round where agents read different replies, each cell says whom its agent read."),
      el("li", {}, "Vote row: ✓ right, ✗ wrong, – no vote, then the answer the rule picked; ⚖ tie: the largest answer groups tied " +
        "and the run's seeded draw picked one (hover for the tie).")));
}

function questionBlock(page, run) {
  const q = page.question;
  let text;
  if (q.text === null) text = el("p", { class: "note" }, q.missing || "The question's text is not recorded.");
  else {
    text = el("div", { class: "qtext", id: "question-text" });
    if (q.text_html !== undefined && q.text_html !== null) text.innerHTML = q.text_html; // Python-escaped, math spans
    else text.textContent = q.text;
  }
  return el("section", { class: "question" },
    el("h2", {}, "Question " + q.id + (page.seed_run ? " (seeded run " + page.seed_run + ")" : "")),
    text,
    el("p", {}, "Gold: ", el("code", { id: "gold" }, q.gold === null ? "–" : answerEl(q.gold, q.kind))),
    run ? el("p", { class: "small" }, run.benchmark + ", " + run.protocol + ", N=" + run.agents + ", T=" + run.rounds +
      ", scored by " + run.rule) : null);
}

// Previous / next through a list of routes, from `here`; keys ← → (and p, n) follow them.
function navBar(back, backText, routes, here, what) {
  const at = routes.indexOf(here);
  NAV = at < 0 ? null : { prev: at > 0 ? routes[at - 1] : null, next: at < routes.length - 1 ? routes[at + 1] : null };
  const link = (id, route, text) => route ? el("a", { id, class: "button", href: route }, text)
    : el("span", { id, class: "button off" }, text);
  return el("nav", { class: "debate-nav" }, el("a", { href: back, id: "back" }, backText),
    NAV ? [" ", link("prev-debate", NAV.prev, "‹ previous"),
      el("span", { id: "position" }, " " + (at + 1) + " of " + routes.length + " " + what + " "),
      link("next-debate", NAV.next, "next ›"), el("span", { class: "small" }, " (keys ← →)")] : null);
}

// The run a known data file belongs to (its name is "run/debate").
function runOf(name) { return INDEX.runs[Number(name.split("/")[0])]; }

async function debatePage(name) {
  const run = runOf(name);
  const i = INDEX.runs.indexOf(run);
  where(run.label);
  const page = await load(name);
  let rows = filtered(run);
  let what = rows.length === run.debates.length ? "debates" : "filtered debates";
  const listed = rows.some((d) => d.file === name);
  if (!listed) { rows = run.debates; what = "debates"; }
  // Back on the list, its page is the one holding this debate.
  if (listed && i === state.run) state.page = Math.floor(rows.findIndex((d) => d.file === name) / PAGE);
  show(navBar("#/run/" + i, "← all debates", rows.map((d) => "#/q/" + d.file), "#/q/" + name, what),
    alertsBox(run, true), questionBlock(page, run), debatePanel(page, run, "", null, true));
}

// ---- runs side by side ----------------------------------------------------------------

function shared() {
  const maps = INDEX.runs.map((run) => new Map(run.debates.map((d) => [d.key, d])));
  const keys = INDEX.runs[0].debates.map((d) => d.key).filter((k) => maps.every((m) => m.has(k)));
  return { maps, keys };
}

const COMPARE = {
  all: ["every shared debate", () => true],
  differ: ["the vote after debate differs", (a, b) => last(a) !== last(b)],
  both_right: ["both right after debate", (a, b) => last(a) === true && last(b) === true],
  a_right_b_wrong: ["A right, B wrong after debate", (a, b) => last(a) === true && last(b) === false],
  a_wrong_b_right: ["A wrong, B right after debate", (a, b) => last(a) === false && last(b) === true],
  both_wrong: ["both wrong after debate", (a, b) => last(a) === false && last(b) === false],
  maj_differ: ["the vote before debate (Maj) differs", (a, b) => a.votes[0] !== b.votes[0]],
};
function last(d) { return d.votes[d.votes.length - 1]; }

// The shared debates the side-by-side list shows now (its filter), in question order.
function compareRows() {
  const { maps, keys } = shared();
  const test = COMPARE[state.compare][1];
  const [a, b] = [maps[state.a], maps[state.b]];
  return { maps, keys, rows: a && b ? keys.filter((k) => test(a.get(k), b.get(k))) : keys };
}
// The paired 2×2 of runs A and B (index.pairs, computed for i < j: swapped for A after B)
// for Maj and Debate, with McNemar's exact p; a cell of Debate's lists its debates.
function pairedTables(redraw) {
  const [a, b] = [state.a, state.b];
  if (a === b) return el("p", { class: "small", id: "paired" }, "Pick two different runs for their paired votes.");
  const found = (INDEX.pairs || {})[Math.min(a, b) + "," + Math.max(a, b)];
  if (!found) return null;
  const one = (name, title) => {
    const t = found[name];
    const [ab, ba] = a < b ? [t.a_only, t.b_only] : [t.b_only, t.a_only];
    const cell = (n, filter) => el("td", { class: "num", "data-cell": filter },
      name === "debate" ? el("a", { href: "#/compare", onclick: (e) => { e.preventDefault(); state.compare = filter; state.cpage = 0; redraw(); } }, String(n)) : String(n));
    const n = t.both_right + t.a_only + t.b_only + t.both_wrong;
    return el("table", { class: "paired", id: "paired-" + name },
      el("caption", {}, title),
      el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, letter(b) + " right"), el("th", {}, letter(b) + " wrong"))),
      el("tbody", {},
        el("tr", {}, el("th", {}, letter(a) + " right"), cell(t.both_right, "both_right"), cell(ab, "a_right_b_wrong")),
        el("tr", {}, el("th", {}, letter(a) + " wrong"), cell(ba, "a_wrong_b_right"), cell(t.both_wrong, "both_wrong"))),
      el("tfoot", {}, el("tr", {}, el("td", { colspan: 3, class: "mcnemar" }, n + " debates; McNemar's exact p " +
        (t.p === null ? "– (none that one run alone got right)" : t.p < 0.001 ? "< 0.001" : "= " + t.p.toFixed(3))))));
  };
  return el("div", { class: "paired-all", id: "paired" }, one("debate", "After debate (Debate)"), one("maj", "Before debate (Maj)"),
    el("p", { class: "small" }, "Pairs are the shared debates (seeded run and question) where both runs voted. McNemar's exact test asks whether " +
      "one run is right alone more often than a fair coin would make it (the two-sided binomial p on the debates only one run got right). " +
      "Click a number of the first table to list its debates."));
}

function compareRoute(maps, k) { return "#/c/" + maps.map((m) => m.get(k).file).join(","); }
const letter = (i) => (i < 26 ? String.fromCharCode(65 + i) : "R" + (i + 1));

function comparePage() {
  where("side by side");
  const { maps, keys } = shared();
  const names = INDEX.runs.map((r, i) => letter(i) + ": " + (r.label));
  const holder = el("div", { id: "compare" });
  const pickRun = (id, which) => el("select", { id, onchange: (e) => { state[which] = Number(e.target.value); state.cpage = 0; redraw(); } },
    names.map((nm, i) => el("option", { value: i, selected: state[which] === i }, nm)));
  const redraw = () => {
    const { rows } = compareRows();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.cpage = Math.min(state.cpage, pages - 1);
    const shown = rows.slice(state.cpage * PAGE, (state.cpage + 1) * PAGE);
    const body = el("tbody", { id: "compare-rows" }, shown.map((k) => {
      const first = maps[0].get(k);
      const route = compareRoute(maps, k);
      return el("tr", { "data-key": k, class: "row", onclick: () => { location.hash = route; } },
        el("td", { class: "qid" }, el("a", { href: route }, first.question), first.seed_run ? " (run " + first.seed_run + ")" : ""),
        snippet(first), el("td", {}, answerEl(first.gold, INDEX.runs[0].kind)),
        maps.map((m) => { const d = m.get(k); return el("td", { class: "votes" },
          el("span", { class: "vote " + markClass(d.votes[0]), title: "Maj" }, mark(d.votes[0])), " → ",
          el("span", { class: "vote " + markClass(last(d)), title: "Debate" }, mark(last(d)))); }));
    }));
    put(holder,
      el("div", { class: "controls" }, "A ", pickRun("run-a", "a"), " B ", pickRun("run-b", "b"), " show ",
        el("select", { id: "compare-filter", onchange: (e) => { state.compare = e.target.value; state.cpage = 0; redraw(); } },
          Object.entries(COMPARE).map(([k, [t]]) => el("option", { value: k, selected: state.compare === k }, t)))),
      el("div", { class: "pager" },
        el("button", { disabled: state.cpage === 0, onclick: () => { state.cpage--; redraw(); } }, "‹ prev"),
        el("span", { id: "compare-count" }, " " + rows.length + " of " + keys.length + " shared debates "),
        el("button", { disabled: state.cpage >= pages - 1, onclick: () => { state.cpage++; redraw(); } }, "next ›")),
      pairedTables(redraw),
      el("p", { class: "small" }, "Each run's column shows its Maj → Debate votes: " + names.join("; ") + "."),
      el("div", { class: "wide" }, el("table", { class: "list compare" }, el("thead", {}, el("tr", {}, ["question", "text", "gold"].map((h) => el("th", {}, h)),
        names.map((nm, i) => el("th", { title: nm }, letter(i))))), body)));
  };
  redraw();
  show(el("p", {}, el("a", { href: "#/" }, "← overview")), runsTable(),
    el("h2", {}, "Runs side by side on the " + keys.length + " debates they share"), holder);
}

async function compareDebate(files) {
  where("side by side");
  const pages = await Promise.all(files.map(load));
  const { maps, keys, rows } = compareRows();
  const here = "#/c/" + files.join(",");
  let routes = rows.map((k) => compareRoute(maps, k));
  let what = rows.length === keys.length ? "shared debates" : "listed debates";
  if (!routes.includes(here)) { routes = keys.map((k) => compareRoute(maps, k)); what = "shared debates"; }
  show(navBar("#/compare", "← side by side", routes, here, what),
    questionBlock(pages[0], null),
    el("div", { class: "side" }, pages.map((page, i) => {
      const run = runOf(files[i]);
      return debatePanel(page, run, "p" + i + "-", letter(i) + ": " + (run.label), false);
    })));
}

// ---- routing --------------------------------------------------------------------------

// The routes: #/ (overview), #/run/I, #/q/I/N, #/compare and #/c/I/N,J/M; a debate's key
// must be one the index lists. Anything else is not found.
function known(name) { return name !== "index" && FILES.has(name); }

function runNumber(text) {
  return /^\d+$/.test(text) && Number(text) < INDEX.runs.length ? Number(text) : null;
}

function notFound() {
  where("not found");
  show(el("div", { id: "not-found", class: "note" },
    el("p", {}, "Not found: " + location.hash + " is not a page of this site."),
    el("p", {}, el("a", { href: "#/" }, "← overview"))));
}

async function route() {
  NAV = null;
  try {
    let parts;
    try {
      parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
    } catch (err) {
      throw new NotFound(location.hash); // a malformed %-escape
    }
    const [head, ...rest] = parts;
    const key = rest.join("/");
    if (parts.length === 0) overview(state.run);
    else if (head === "run" && rest.length === 1 && runNumber(rest[0]) !== null) overview(runNumber(rest[0]));
    else if (head === "q" && rest.length === 2 && known(key)) await debatePage(key);
    else if (head === "compare" && rest.length === 0 && INDEX.runs.length > 1) comparePage();
    else if (head === "c" && key.split(",").every(known)) await compareDebate(key.split(","));
    else throw new NotFound(location.hash);
  } catch (err) {
    if (err instanceof NotFound) notFound();
    else show(el("p", { class: "note" }, String(err.message || err)));
  }
  document.body.setAttribute("data-ready", location.hash || "#/");
}

// ← and → (or p and n) open the previous and next debate of the list it was opened from.
function onKey(e) {
  if (!NAV || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
  const t = e.target;
  if (t && (t.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName))) return;
  const to = e.key === "ArrowLeft" || e.key === "p" ? NAV.prev : e.key === "ArrowRight" || e.key === "n" ? NAV.next : undefined;
  if (to === undefined) return;
  e.preventDefault();
  if (to) location.hash = to;
}

load("index").then((index) => {
  INDEX = index;
  for (const [name, src] of Object.entries(index.files || {})) {
    if (/^\d+\/\d+$/.test(name) && DATA_FILE.test(src) && src === "data/" + name + ".js") FILES.set(name, src);
  }
  window.addEventListener("hashchange", route);
  document.addEventListener("keydown", onKey);
  route();
}, (err) => show(el("p", { class: "note" }, err.message + ": run mad-eval view again to write the site.")));
