// mad-eval view: the pages of a static site written by `mad-eval view`.
// Data comes as scripts (data/*.js) that call MADV.loaded(name, value): file:// pages
// cannot fetch(). Every text from a run is inserted as text (textContent), never as HTML;
// the one exception is Markdown that Python rendered with raw HTML off (text_html).
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

const fmt = (x, digits = 1) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const mark = (v) => (v === true ? "✓" : v === false ? "✗" : "–");
const markClass = (v) => (v === true ? "right" : v === false ? "wrong" : "none");

let INDEX = null;
const state = { run: 0, tags: new Set(), search: "", below: "", sort: "order", desc: false, page: 0,
  a: 0, b: 1, compare: "differ", cpage: 0 };

function app() { return document.getElementById("app"); }
function show(...nodes) { app().replaceChildren(...nodes.filter((n) => n !== null && n !== undefined)); }
function where(text) { document.getElementById("where").textContent = text; }

// ---- overview -------------------------------------------------------------------------

function runsTable() {
  const rows = INDEX.runs.map((run, i) => {
    const s = run.summary;
    return el("tr", { "data-run": i },
      el("td", {}, el("a", { href: "#/run/" + i }, run.label)),
      el("td", {}, run.method), el("td", {}, run.benchmark), el("td", {}, String(run.agents)), el("td", {}, String(run.rounds)),
      el("td", {}, run.rule),
      el("td", { class: "num", "data-field": "maj", "data-value": s.maj }, fmt(s.maj)),
      el("td", { class: "num", "data-field": "debate", "data-value": s.debate }, fmt(s.debate)),
      el("td", { class: "num", "data-field": "delta", "data-value": s.delta }, fmt(s.delta)),
      el("td", {}, s.rounds.map((r) => fmt(r.vote_accuracy)).join(" → ")),
      el("td", {}, s.transitions.map((t) => "C→I " + fmt(t.c2i) + " / I→C " + fmt(t.i2c)).join("; ")),
      el("td", { class: "num" }, String(run.debates.length)));
  });
  return el("table", { id: "runs", class: "runs" },
    el("thead", {}, el("tr", {}, ["run", "settings", "benchmark", "N", "T", "rule", "Maj", "Debate", "Δ",
      "vote accuracy by round", "transitions (% of agents)", "debates"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
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
  if (state.sort !== "order") {
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
    [["order", "run order"], ["agreement", "agreement (last round)"], ["tokens", "tokens generated"],
      ["critique", "critique score"]].map(([v, t]) => el("option", { value: v, selected: state.sort === v }, t)));
  const desc = el("label", {}, el("input", { type: "checkbox", id: "desc", checked: state.desc,
    onchange: (e) => { state.desc = e.target.checked; redraw(); } }), " descending");
  return el("div", { class: "controls" }, el("div", { class: "tags" }, tags),
    el("div", {}, search, " ", below, " sort by ", sort, " ", desc));
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
    const body = el("tbody", { id: "rows" }, shown.map((d) => el("tr", { "data-key": d.key, class: "row",
      onclick: () => { location.hash = "#/q/" + d.file; } },
      el("td", {}, el("a", { href: "#/q/" + d.file }, d.question), d.seed_run ? " (run " + d.seed_run + ")" : ""),
      el("td", { class: "text" }, d.text),
      el("td", {}, d.gold),
      el("td", { class: "votes" }, d.votes.map((v, r) => el("span", { class: "vote " + markClass(v),
        title: "round " + r + ": " + (d.answers[r] === null ? "no answer" : d.answers[r]) }, mark(v)))),
      el("td", {}, d.tags.map((t) => el("span", { class: "chip" }, t))),
      el("td", { class: "num" }, fmt(d.agreement === null ? null : 100 * d.agreement, 0)),
      el("td", { class: "num" }, String(d.tokens)),
      el("td", { class: "num" }, fmt(d.critique)))));
    const pager = el("div", { class: "pager" },
      el("button", { id: "prev", disabled: state.page === 0, onclick: () => { state.page--; redraw(); } }, "‹ prev"),
      el("span", { id: "count" }, " " + rows.length + " of " + run.debates.length + " debates, page " +
        (state.page + 1) + " of " + pages + " "),
      el("button", { id: "next", disabled: state.page >= pages - 1, onclick: () => { state.page++; redraw(); } }, "next ›"));
    holder.replaceChildren(controls(run, redraw), pager,
      el("table", { class: "list" }, el("thead", {}, el("tr", {}, ["question", "text", "gold",
        "vote by round (0.." + rounds + ")", "tags", "agree %", "tokens", "critique"].map((h) => el("th", {}, h)))), body));
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
  show(runsTable(), ...INDEX.runs.map(roundsDetail),
    run.questions_note ? el("p", { class: "note" }, run.questions_note) : null,
    tabs, el("h2", {}, "Debates of " + (run.label)), debateList(i));
}

// ---- a debate -------------------------------------------------------------------------

function grid(page, onpick, prefix) {
  const byCell = {};
  page.turns.forEach((t) => { byCell[t.agent + "/" + t.round] = t; });
  const head = el("tr", {}, el("th", {}, "agent"),
    Array.from({ length: page.rounds + 1 }, (_, r) => el("th", {}, "round " + r)));
  const rows = [];
  for (let a = 0; a < page.agents; a++) {
    const cells = [];
    for (let r = 0; r <= page.rounds; r++) {
      const t = byCell[a + "/" + r];
      if (!t) { cells.push(el("td", { class: "cell missing" }, "not recorded")); continue; }
      cells.push(el("td", { class: "cell " + t.class + (t.changed ? " changed" : ""),
        id: prefix + "cell-" + a + "-" + r, "data-agent": a, "data-round": r, "data-class": t.class,
        title: t.class + (t.changed ? ", changed its answer" : ""), onclick: () => onpick(t) },
        el("span", { class: "answer" }, t.error ? "failed" : t.answer === null ? "unparsed" : t.answer),
        t.changed ? el("span", { class: "changed-mark", title: "changed its answer" }, " ↻") : null,
        t.truncated ? el("span", { class: "trunc", title: "cut off at the token limit" }, " ✂") : null,
        t.sees.length ? el("div", { class: "sees" }, "read " + t.sees.join(", ")) : null));
    }
    rows.push(el("tr", {}, el("th", {}, "agent " + a + (a === page.hub ? " (hub)" : "") +
      (page.voters.includes(a) ? "" : " (no vote)")), cells));
  }
  rows.push(el("tr", { class: "vote-row" }, el("th", {}, "vote"),
    page.votes.map((v, r) => el("td", { class: "vote " + markClass(v), "data-round": r },
      mark(v) + " " + (page.answers[r] === null ? "" : page.answers[r])))));
  return el("table", { class: "grid" }, el("thead", {}, head), el("tbody", {}, rows));
}

function readsWhom(page) {
  const lines = [];
  for (let r = 1; r <= page.rounds; r++) {
    const reads = page.turns.filter((t) => t.round === r)
      .map((t) => "agent " + t.agent + " ← " + (t.sees.length ? t.sees.join(", ") : "nobody"));
    lines.push(el("li", {}, "round " + r + ": " + reads.join("; ")));
  }
  return lines.length ? el("details", { class: "reads" }, el("summary", {}, "Who read whom"), el("ul", {}, lines)) : null;
}

function textBlock(title, text, html, id) {
  if (text === null || text === undefined) return null;
  const raw = el("pre", { class: "raw", id: id + "-raw" }, text);
  if (!html) return el("section", {}, el("h4", {}, title), raw);
  const rendered = el("div", { class: "markdown", id: id + "-rendered" });
  rendered.innerHTML = html; // Python's markdown-it output: raw HTML, images and unsafe links off
  raw.hidden = true;
  const toggle = el("button", { class: "toggle", id: id + "-toggle", onclick: () => {
    raw.hidden = !raw.hidden; rendered.hidden = !rendered.hidden;
    toggle.textContent = raw.hidden ? "show raw text" : "show rendered";
  } }, "show raw text");
  return el("section", {}, el("h4", {}, title, " ", toggle), rendered, raw);
}

function detail(t, prefix) {
  const meta = [["model", t.model], ["seed", t.seed], ["finish", t.finish_reason],
    ["prompt tokens", t.prompt_tokens], ["completion tokens", t.completion_tokens],
    ["reasoning tokens", t.reasoning_tokens], ["latency (s)", fmt(t.latency, 3)],
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
    prompt = el("details", { class: "prompt" }, el("summary", {}, "The prompt it was sent (" + t.prompt.length + " messages, rebuilt and checked against its hash)"),
      t.prompt.map((m) => el("div", { class: "message" }, el("div", { class: "role" }, m.role), el("pre", { class: "raw" }, m.content))));
  } else {
    prompt = el("p", { class: "note prompt-note" }, t.prompt_note || "The prompt is not available.");
  }
  return el("div", { class: "detail", id: prefix + "detail", "data-agent": t.agent, "data-round": t.round },
    el("h3", {}, "Agent " + t.agent + ", round " + t.round + ": " + t.class + (t.changed ? " (changed its answer)" : "")),
    t.sees.length ? el("p", {}, "Read agents " + t.sees.join(", ") + " of round " + (t.round - 1) + ".") : null,
    textBlock("Reply", t.text, t.text_html, prefix + "reply"),
    textBlock("Reasoning", t.reasoning, t.reasoning_html, prefix + "reasoning"),
    el("table", { class: "meta" }, el("tbody", {}, meta)), verdict, prompt);
}

function debatePanel(page, prefix, label) {
  const out = el("div", { class: "detail-holder", id: prefix + "detail-holder" },
    el("p", { class: "note" }, "Click a cell to read its reply."));
  const pick = (t) => {
    out.replaceChildren(detail(t, prefix));
    document.querySelectorAll("#" + prefix + "grid .cell.picked").forEach((c) => c.classList.remove("picked"));
    const cell = document.getElementById(prefix + "cell-" + t.agent + "-" + t.round);
    if (cell) cell.classList.add("picked");
  };
  return el("div", { class: "panel", id: prefix + "panel" }, label ? el("h3", {}, label) : null,
    el("div", { id: prefix + "grid" }, grid(page, pick, prefix)), readsWhom(page), out);
}

function questionBlock(page, run) {
  const q = page.question;
  return el("section", { class: "question" },
    el("h2", {}, "Question " + q.id + (page.seed_run ? " (seeded run " + page.seed_run + ")" : "")),
    q.text === null ? el("p", { class: "note" }, q.missing || "The question's text is not recorded.")
      : el("pre", { class: "raw", id: "question-text" }, q.text),
    el("p", {}, "Gold: ", el("code", { id: "gold" }, q.gold === null ? "–" : q.gold)),
    run ? el("p", { class: "small" }, run.benchmark + ", " + run.protocol + ", N=" + run.agents + ", T=" + run.rounds +
      ", scored by " + run.rule) : null);
}

// The run a known data file belongs to (its name is "run/debate").
function runOf(name) { return INDEX.runs[Number(name.split("/")[0])]; }

async function debatePage(name) {
  const run = runOf(name);
  const i = INDEX.runs.indexOf(run);
  where(run.label);
  const page = await load(name);
  show(el("p", {}, el("a", { href: "#/run/" + i, id: "back" }, "← all debates")),
    questionBlock(page, run), debatePanel(page, "", null));
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
  a_right_b_wrong: ["A right, B wrong after debate", (a, b) => last(a) === true && last(b) === false],
  a_wrong_b_right: ["A wrong, B right after debate", (a, b) => last(a) === false && last(b) === true],
  both_wrong: ["both wrong after debate", (a, b) => last(a) === false && last(b) === false],
  maj_differ: ["the vote before debate (Maj) differs", (a, b) => a.votes[0] !== b.votes[0]],
};
function last(d) { return d.votes[d.votes.length - 1]; }

function comparePage() {
  where("side by side");
  const { maps, keys } = shared();
  const names = INDEX.runs.map((r, i) => String.fromCharCode(65 + i) + ": " + (r.label));
  const holder = el("div", { id: "compare" });
  const pickRun = (id, which) => el("select", { id, onchange: (e) => { state[which] = Number(e.target.value); state.cpage = 0; redraw(); } },
    names.map((nm, i) => el("option", { value: i, selected: state[which] === i }, nm)));
  const redraw = () => {
    const test = COMPARE[state.compare][1];
    const rows = keys.filter((k) => test(maps[state.a].get(k), maps[state.b].get(k)));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.cpage = Math.min(state.cpage, pages - 1);
    const shown = rows.slice(state.cpage * PAGE, (state.cpage + 1) * PAGE);
    const body = el("tbody", { id: "compare-rows" }, shown.map((k) => {
      const first = maps[0].get(k);
      const files = maps.map((m) => m.get(k).file).join(",");
      return el("tr", { "data-key": k, class: "row", onclick: () => { location.hash = "#/c/" + files; } },
        el("td", {}, el("a", { href: "#/c/" + files }, first.question), first.seed_run ? " (run " + first.seed_run + ")" : ""),
        el("td", { class: "text" }, first.text), el("td", {}, first.gold),
        maps.map((m) => { const d = m.get(k); return el("td", { class: "votes" },
          el("span", { class: "vote " + markClass(d.votes[0]), title: "Maj" }, mark(d.votes[0])), " → ",
          el("span", { class: "vote " + markClass(last(d)), title: "Debate" }, mark(last(d)))); }));
    }));
    holder.replaceChildren(
      el("div", { class: "controls" }, "A ", pickRun("run-a", "a"), " B ", pickRun("run-b", "b"), " show ",
        el("select", { id: "compare-filter", onchange: (e) => { state.compare = e.target.value; state.cpage = 0; redraw(); } },
          Object.entries(COMPARE).map(([k, [t]]) => el("option", { value: k, selected: state.compare === k }, t)))),
      el("div", { class: "pager" },
        el("button", { disabled: state.cpage === 0, onclick: () => { state.cpage--; redraw(); } }, "‹ prev"),
        el("span", { id: "compare-count" }, " " + rows.length + " of " + keys.length + " shared debates "),
        el("button", { disabled: state.cpage >= pages - 1, onclick: () => { state.cpage++; redraw(); } }, "next ›")),
      el("table", { class: "list" }, el("thead", {}, el("tr", {}, ["question", "text", "gold"].map((h) => el("th", {}, h)),
        names.map((nm) => el("th", {}, nm + " (Maj → Debate)")))), body));
  };
  redraw();
  show(el("p", {}, el("a", { href: "#/" }, "← overview")), runsTable(),
    el("h2", {}, "Runs side by side on the " + keys.length + " debates they share"), holder);
}

async function compareDebate(files) {
  where("side by side");
  const pages = await Promise.all(files.map(load));
  show(el("p", {}, el("a", { href: "#/compare", id: "back" }, "← side by side")),
    questionBlock(pages[0], null),
    el("div", { class: "side" }, pages.map((page, i) => {
      const run = runOf(files[i]);
      return debatePanel(page, "p" + i + "-", String.fromCharCode(65 + i) + ": " + (run.label));
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

load("index").then((index) => {
  INDEX = index;
  for (const [name, src] of Object.entries(index.files || {})) {
    if (/^\d+\/\d+$/.test(name) && DATA_FILE.test(src) && src === "data/" + name + ".js") FILES.set(name, src);
  }
  window.addEventListener("hashchange", route);
  route();
}, (err) => show(el("p", { class: "note" }, err.message + ": run mad-eval view again to write the site.")));
