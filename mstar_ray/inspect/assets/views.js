// The views of a run, drawn from its snapshot (mstar_ray.inspect.snapshot): the live page (mstar-ray serve)
// redraws them as the logs grow, the report draws them once. Candidate text (ids, commit messages, diffs,
// violation messages) is set as text, never as markup: a hostile program or message stays inert.
"use strict";
(function () {
  const COLOURS = {seed: "#2ca02c", violation: "#d62728", failed: "#7f7f7f", child: "#1f77b4", returned: "#ff7f0e"};

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  }

  function plural(n, word, many) { return n + " " + (n === 1 ? word : (many || word + "s")); }

  // Plotly reads hover text as a small markup language: every <, > and & from a candidate goes in as an entity.
  function inert(text) { return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }

  // Hover text: the message cut at a word with an ellipsis, on lines of about 60 characters.
  function hoverMessage(text) {
    const words = String(text || "").split(/\s+/).filter(Boolean);
    const lines = [];
    let line = "", used = 0;
    for (const word of words) {
      if (used + word.length > 300) { line += " …"; break; }
      if (line && line.length + word.length > 60) { lines.push(line); line = word; } else line = line ? line + " " + word : word;
      used += word.length + 1;
    }
    if (line) lines.push(line);
    return lines.map(inert).join("<br>");
  }

  function kind(c) {
    return c.status === "violation" ? "violation" : c.status === "failed" ? "failed" : c.origin === "seed" ? "seed" : "child";
  }

  // [the id a click looks up, then what the hover shows, each inert]
  function hover(c) { return [c.id, hoverMessage(c.message), inert(c.score_text), inert(c.origin), inert(c.id)]; }
  const HOVER = "<b>%{customdata[4]}</b> (%{customdata[3]})<br>score %{customdata[2]}<br>%{customdata[1]}<extra></extra>";

  function returnedTrace(snap, y) {
    const r = snap.returned && snap.candidates.find(c => c.id === snap.returned.id);
    if (!r) return [];
    return [{x: [r.n], y: [y(r)], mode: "markers", type: "scatter", name: snap.returned.final ? "returned" : "returned so far",
             marker: {symbol: "star", size: 16, color: COLOURS.returned, line: {color: "black", width: 1}},
             customdata: [hover(r)], hovertemplate: HOVER}];
  }

  const LAYOUT = {margin: {l: 55, r: 10, t: 10, b: 45}, height: 360, hovermode: "closest", hoverlabel: {align: "left"},
                  legend: {orientation: "h", y: -0.22}, xaxis: {title: {text: "programs in the order evaluated (seeds first)"}}};

  function scoresPlot(node, snap, pick) {
    const scored = snap.candidates.filter(c => c.score !== null);
    const groups = {};
    for (const c of scored) (groups[kind(c)] = groups[kind(c)] || []).push(c);
    const label = {seed: "seeds", child: "children", violation: "violations (score 0)", failed: "failed evaluations"};
    const traces = Object.entries(groups).map(([k, cs]) => ({
      x: cs.map(c => c.n), y: cs.map(c => c.score), mode: "markers", type: "scatter", name: label[k],
      marker: {color: COLOURS[k], size: 7},
      error_y: {type: "data", symmetric: false, color: "#bbbbbb", thickness: 1, width: 0,
                array: cs.map(c => c.interval ? c.interval[1] - c.score : 0),
                arrayminus: cs.map(c => c.interval ? c.score - c.interval[0] : 0)},
      customdata: cs.map(hover), hovertemplate: HOVER}));
    const line = snap.best_line;
    if (line.length) {
      traces.push({x: line.map(p => p.n), y: line.map(p => p.score), mode: "lines", type: "scatter", line: {shape: "hv", color: "black"},
                   name: "what the run would return", hoverinfo: "skip"});
    }
    traces.push(...returnedTrace(snap, c => c.score));
    draw(node, traces, {...LAYOUT, yaxis: {title: {text: "static score (95% interval)"}}}, pick);
  }

  function lineagePlot(node, snap, pick) {
    const at = {};
    for (const c of snap.candidates) if (c.score !== null) at[c.id] = c;
    const xs = [], ys = [];
    for (const c of Object.values(at)) {
      const p = at[c.parent];
      if (p) { xs.push(p.n, c.n, null); ys.push(p.score, c.score, null); }
    }
    const points = Object.values(at);
    const onPath = new Set();
    let current = snap.returned ? at[snap.returned.id] : null;
    while (current && !onPath.has(current.id)) { onPath.add(current.id); current = at[current.parent]; }
    const path = points.filter(c => onPath.has(c.id)).sort((a, b) => a.n - b.n);
    const traces = [
      {x: xs, y: ys, mode: "lines", type: "scatter", line: {color: "#bbbbbb", width: 1}, name: "parent to child", hoverinfo: "skip"},
      {x: path.map(c => c.n), y: path.map(c => c.score), mode: "lines", type: "scatter", line: {color: COLOURS.returned, width: 2},
       name: "the returned program's line", hoverinfo: "skip"},
      {x: points.map(c => c.n), y: points.map(c => c.score), mode: "markers", type: "scatter", name: "programs",
       marker: {color: points.map(c => COLOURS[kind(c)]), size: 7}, customdata: points.map(hover), hovertemplate: HOVER},
      ...returnedTrace(snap, c => c.score)];
    draw(node, traces, {...LAYOUT, yaxis: {title: {text: "static score"}}}, pick);
  }

  function draw(node, traces, layout, pick) {
    if (!window.Plotly) { node.textContent = "(plotly.js did not load)"; return; }
    Plotly.react(node, traces, layout, {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["toImage"]});
    if (!node.dataset.bound) {
      node.dataset.bound = "1";
      node.on("plotly_click", event => {
        const point = event.points && event.points[0];
        if (point && point.customdata) pick(point.customdata[0]);
      });
    }
  }

  function facts(node, snap) {
    const p = snap.progress, items = [];
    const state = {running: "running", finished: "finished", interrupted: "interrupted (resume it with mstar-ray run --resume)"};
    items.push("run " + snap.run + " · " + state[p.phase] + " · task " + snap.task + " · reflector " + snap.reflector);
    items.push(plural(p.evaluated, "candidate") + " evaluated" + (p.target ? " of " + p.target : "") + " · " +
               plural(p.discarded, "discarded", "discarded") + " · " + plural(p.violations, "violation") + " · " +
               plural(p.duplicates, "duplicate") + " · " + plural(p.screened_out, "screened out", "screened out") + " · " +
               plural(p.reflections, "reflection") + " started");
    if (snap.returned) {
      const r = snap.returned;
      items.push((r.final ? "returned " : "best so far ") + r.id + " static " + r.score_text +
                 (r.test_text ? " · test " + r.test_text : "") + " (" + (r.origin === "seed" ? "" : r.origin + ": ") + r.message + ")");
    }
    if (snap.best_seed) {
      const s = snap.best_seed;
      items.push("best seed " + s.id + " static " + s.score_text + (s.test_text ? " · test " + s.test_text : "") + " (" + s.message + ")");
    }
    const c = snap.cost;
    items.push("cost $" + c.usd.toFixed(4) + ", " + plural(c.tokens, "token") + " · " + c.cache_text);
    for (const metric of snap.metrics) items.push("scored by " + metric);
    if (snap.stopped) items.push("stopped: " + snap.stopped);
    if (snap.selection) items.push("chosen by " + snap.selection.rule + ": " + snap.selection.how);
    node.replaceChildren(el("ul", {}, ...items.map(t => el("li", {}, t))));
  }

  function progressBar(node, snap) {
    const p = snap.progress;
    const share = p.target ? Math.min(1, p.evaluated / p.target) : 0;
    node.replaceChildren(el("progress", {max: "1", value: String(share)}),
                         " " + p.evaluated + (p.target ? "/" + p.target : "") + " · " + p.phase);
  }

  function table(head, rows) {
    return el("table", {}, el("tr", {}, ...head.map(h => el("th", {}, h))), ...rows);
  }

  function population(node, snap, pick) {
    const returned = snap.returned ? snap.returned.id : null;
    const rows = snap.candidates.slice().reverse().map(c => el("tr", {class: c.id === returned ? "returned" : "", "data-id": c.id},
      el("td", {}, String(c.n)), el("td", {}, el("a", {href: "#change", onclick: () => pick(c.id)}, c.id)),
      el("td", {class: "score"}, c.score_text), el("td", {}, c.origin),
      el("td", {}, c.status + (c.id !== returned ? "" : snap.returned.final ? " · returned" : " · best so far")),
      el("td", {}, c.parent || ""), el("td", {class: "msg"}, c.violation ? c.message + " [" + c.violation + "]" : c.message)));
    node.replaceChildren(table(["#", "program", "static [95% interval]", "origin", "status", "parent", "change"], rows));
  }

  function failures(node, snap) {
    if (!snap.failures.some(f => Object.keys(f.stages).length)) { node.replaceChildren("(no failure attributed yet)"); return; }
    node.replaceChildren(table(["program", "storage", "retrieval", "answering", "evidence never written"], snap.failures.map(f =>
      el("tr", {}, el("td", {}, f.label + " " + f.id), ...["storage", "retrieval", "answering", "not_written"].map(s =>
        el("td", {}, String(f.stages[s] || 0)))))));
  }

  function inFlight(node, snap) {
    const p = snap.progress;
    const lines = snap.in_flight.map(e => el("li", {}, e.purpose + " " + e.candidate.slice(0, 8) + ": texts " + e.texts_done +
      "/" + e.texts_total + ", questions " + e.items_done + "/" + e.items_total +
      (e.eta_s === null ? "" : ", about " + (e.eta_s / 60).toFixed(1) + " min left")));
    node.replaceChildren(el("p", {}, plural(p.queued, "candidate") + " queued or evaluating · " + plural(p.reflecting, "reflection") + " in flight"),
                         el("ul", {}, ...lines));
  }

  function nodes(node, snap) {
    node.replaceChildren(table(["node", "evaluations", "last finished"], snap.nodes.map(n =>
      el("tr", {}, el("td", {}, n.node), el("td", {}, String(n.evaluations)), el("td", {}, n.last)))));
  }

  // One child against its parent, the reflector's message beside it.
  function change(node, found) {
    if (!found) { node.replaceChildren("(unknown program)"); return; }
    const diff = found.lines === null ? el("p", {}, "(a source is missing from the run directory)")
      : el("pre", {class: "diff"}, ...found.lines.map(([k, line]) => el("span", {class: k}, line)));
    node.replaceChildren(el("h3", {}, found.id + (found.parent ? " from " + found.parent : " (a seed)")),
                         el("div", {class: "change-body"}, el("div", {class: "msg"}, el("b", {}, "commit message"), el("br"), found.message), diff));
  }

  function render(snap, pick) {
    const views = {progress: progressBar, facts: facts, scores: scoresPlot, lineage: lineagePlot, population: population,
                   failures: failures, flight: inFlight, nodes: nodes};
    for (const [id, view] of Object.entries(views)) {
      const node = document.getElementById(id);
      if (node) view(node, snap, pick);
    }
  }

  window.MstarViews = {render: render, change: change};
})();
