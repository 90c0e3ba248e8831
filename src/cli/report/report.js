// The page of `rubric report`: draws the figures `src/cli/report.rs` computed (the element
// #data) and the rows table. Every text from the records or the rows is set with textContent
// (model output is untrusted), never as markup.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const PAGE = 200;

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  function fmt(x, digits) {
    if (x === null || x === undefined) return "–";
    return Number(x).toFixed(digits === undefined ? 4 : digits);
  }
  function usd(x) {
    return "$" + Number(x).toFixed(x < 0.01 ? 6 : 4);
  }

  // ---------------------------------------------------------------- header
  document.getElementById("title").textContent = data.title;
  const s = data.summary || {};
  document.getElementById("identity").textContent = [
    data.rubric && "rubric " + data.rubric,
    data.version && "version " + data.version,
    data.ir_hash,
  ].filter(Boolean).join(" · ");
  document.getElementById("counts").textContent =
    `${s.rows} rows: ${s.scored} scored, ${s.unscored} unscored, ${s.errors} error records` +
    (s.run_seconds ? ` · run took ${fmt(s.run_seconds, 2)} s` : "");
  document.getElementById("sources").textContent =
    "from " + Object.entries(data.sources).map(([k, v]) => `${k} ${v}`).join(", ");

  // ---------------------------------------------------------------- headline statistics
  const stats = s.stats || [];
  const headline = document.getElementById("headline");
  for (const st of stats.filter((x) => x.key === undefined || x.key === null)) {
    const card = el("div", { class: "card stat-card", "data-name": st.name });
    card.append(el("div", { class: "name" }, `${st.name} = ${st.declared}`));
    card.append(el("div", { class: "value" }, fmt(st.value)));
    const iv = st.interval ? `${Math.round(s.bootstrap.confidence * 100)}% [${fmt(st.interval[0])}, ${fmt(st.interval[1])}]` : "no interval";
    card.append(el("div", { class: "interval" }, iv));
    card.append(el("div", { class: "n" }, `n ${st.n}` + (st.left_out ? `, ${st.left_out} left out` : "")));
    headline.append(card);
  }
  for (const nc of s.not_computed || []) {
    headline.append(el("div", { class: "card muted" }, `${nc.name}: not computed (${nc.reason})`));
  }
  // Keyed statistics: one chart of values with interval whiskers per statistic.
  const keyed = {};
  for (const st of stats.filter((x) => x.key !== undefined && x.key !== null)) (keyed[st.name] = keyed[st.name] || []).push(st);
  for (const [name, values] of Object.entries(keyed)) {
    const box = el("div", { class: "chart keyed-chart", "data-name": name });
    box.append(el("h3", {}, `${name} = ${values[0].declared}`));
    box.append(valueChart(values));
    document.getElementById("keyed").append(box);
  }

  function valueChart(values) {
    const lo = Math.min(0, ...values.map((v) => (v.interval ? v.interval[0] : v.value ?? 0)));
    const hi = Math.max(1, ...values.map((v) => (v.interval ? v.interval[1] : v.value ?? 0)));
    const labelW = 300, w = 1100, rowH = 22;
    const g = svg("svg", { viewBox: `0 0 ${w} ${values.length * rowH + 8}`, role: "img" });
    const x = (v) => labelW + ((v - lo) / (hi - lo)) * (w - labelW - 70);
    values.forEach((v, i) => {
      const y = i * rowH + 4;
      const t = svg("text", { x: 0, y: y + 14 });
      t.textContent = v.key;
      g.append(t);
      if (v.value !== null) {
        g.append(svg("rect", { class: "hist-bar value-bar", x: x(Math.min(0, v.value)), y: y + 3, width: Math.max(1, Math.abs(x(v.value) - x(0))), height: rowH - 8 }));
      }
      if (v.interval) {
        g.append(svg("line", { class: "whisker", x1: x(v.interval[0]), x2: x(v.interval[1]), y1: y + rowH / 2, y2: y + rowH / 2 }));
      }
      const n = svg("text", { x: w - 66, y: y + 14 });
      n.textContent = `${fmt(v.value, 3)} n ${v.n}`;
      g.append(n);
    });
    return g;
  }

  // ---------------------------------------------------------------- histogram
  (function () {
    const h = data.histogram, w = 420, ht = 196, pad = 24, top = 16;
    const max = Math.max(1, ...h.counts);
    const g = svg("svg", { viewBox: `0 0 ${w} ${ht + pad}`, role: "img", "aria-label": "score histogram" });
    const bw = (w - 10) / h.counts.length;
    h.counts.forEach((c, i) => {
      const bh = (c / max) * (ht - top);
      const r = svg("rect", { class: "hist-bar", "data-count": c, x: 5 + i * bw + 1, y: ht - bh, width: bw - 2, height: Math.max(bh, c > 0 ? 1 : 0) });
      const tip = svg("title");
      const a = h.lo + ((h.hi - h.lo) * i) / h.counts.length, b = h.lo + ((h.hi - h.lo) * (i + 1)) / h.counts.length;
      tip.textContent = `[${fmt(a, 2)}, ${fmt(b, 2)}${i === h.counts.length - 1 ? "]" : ")"}: ${c} rows`;
      r.append(tip);
      g.append(r);
      if (c > 0) {
        const t = svg("text", { x: 5 + i * bw + bw / 2 - 4, y: ht - bh - 3 });
        t.textContent = c;
        g.append(t);
      }
    });
    for (const [v, anchor] of [[h.lo, 5], [h.hi, w - 30]]) {
      const t = svg("text", { x: anchor, y: ht + 16 });
      t.textContent = fmt(v, 2);
      g.append(t);
    }
    document.getElementById("histogram").append(g);
  })();

  // ---------------------------------------------------------------- met / unmet bars
  // `narrow`: drawn in a half-width column, so the same font size needs a narrower canvas.
  function stackedBars(target, bars, cls, narrow) {
    if (!bars.length) {
      target.append(el("p", { class: "muted" }, "none in these records"));
      return;
    }
    const labelW = narrow ? 150 : 260, w = narrow ? 460 : 900, rowH = 20;
    const g = svg("svg", { viewBox: `0 0 ${w} ${bars.length * rowH + 4}`, role: "img" });
    bars.forEach((b, i) => {
      const total = b.met + b.unmet + b.unscored + b.skipped;
      const y = i * rowH + 2;
      const group = svg("g", { class: cls, "data-key": b.key, "data-total": total });
      const label = svg("text", { x: 0, y: y + 13 });
      const room = narrow ? 22 : 38;
      label.textContent = b.key.length > room ? b.key.slice(0, room - 1) + "…" : b.key;
      const tip = svg("title");
      tip.textContent = `${b.key}${b.text ? ": " + b.text : ""} — met ${b.met}, unmet ${b.unmet}, unscored ${b.unscored}, skipped ${b.skipped}`;
      group.append(label, tip);
      let x = labelW;
      for (const part of ["met", "unmet", "unscored", "skipped"]) {
        if (!b[part]) continue;
        const width = (b[part] / Math.max(total, 1)) * (w - labelW - 80);
        group.append(svg("rect", { class: part, x, y: y + 2, width, height: rowH - 6 }));
        x += width;
      }
      const n = svg("text", { x: w - 74, y: y + 13 });
      n.textContent = `${total ? Math.round((100 * b.met) / total) : 0}% met`;
      group.append(n);
      g.append(group);
    });
    target.append(g);
  }
  stackedBars(document.getElementById("criteria"), data.criteria, "crit-bar");
  stackedBars(document.getElementById("axes"), data.axes, "axis-bar", true);

  // ---------------------------------------------------------------- tables of counts
  function countTable(id, head, rows) {
    const t = document.getElementById(id);
    const tr = el("tr");
    head.forEach((h) => tr.append(el("th", {}, h)));
    t.append(tr);
    if (!rows.length) {
      const r = el("tr");
      r.append(el("td", { colspan: head.length, class: "muted" }, "none"));
      t.append(r);
    }
    for (const cells of rows) {
      const r = el("tr");
      cells.forEach((c) => r.append(el("td", {}, c)));
      t.append(r);
    }
  }
  countTable("failures", ["failure class", "rows"], data.failures.map((f) => [f.key, f.n]));
  countTable("reasons", ["reason", "criteria"], data.unscored_reasons.map((f) => [f.key, f.n]));
  countTable(
    "judges",
    ["judge", "criteria", "met", "unmet", "unscored", "cost"],
    data.judges.map((j) => [j.judge, j.criteria, j.met, j.unmet, j.unscored,
      (j.priced ? usd(j.cost_usd) : "–") + (j.cost_unknown ? ` (${j.cost_unknown} unknown)` : "")])
  );
  if (s.judges) {
    const d = s.judges;
    const rows = [
      ["calls over HTTP", d.http_requests], ["answered from the cache", d.cache_hits], ["replayed", d.replayed],
      ["deduplicated", d.deduplicated], ["failed", d.failed], ["invalid replies", d.invalid_replies],
      ["tokens in", d.tokens_in], ["tokens out", d.tokens_out],
    ].filter((r) => r[1] !== undefined);
    const box = document.getElementById("dispatcher");
    box.append(el("h3", {}, "Dispatch (this run)"));
    const t = el("table", { class: "small", id: "dispatch-table" });
    for (const [k, v] of rows) {
      const r = el("tr");
      r.append(el("td", {}, k), el("td", {}, v));
      t.append(r);
    }
    for (const [endpoint, p] of Object.entries(d.latency_ms || {})) {
      const r = el("tr");
      r.append(el("td", {}, `latency ${endpoint} (ms)`), el("td", {}, `p50 ${fmt(p.p50, 0)} · p90 ${fmt(p.p90, 0)} · p99 ${fmt(p.p99, 0)} · max ${fmt(p.max, 0)} (n ${p.n})`));
      t.append(r);
    }
    box.append(t);
  }

  // ---------------------------------------------------------------- agreement
  if (data.agreement.length) {
    document.getElementById("agreement-section").hidden = false;
    const m = (x) => (x && x.value !== undefined && x.value !== null
      ? fmt(x.value, 3) + (x.ci ? ` [${fmt(x.ci[0], 3)}, ${fmt(x.ci[1], 3)}]` : "")
      : "–");
    countTable(
      "agreement",
      ["group", "kind", "items", "pairs", "accuracy", "balanced accuracy", "κ", "α", "annotators' α"],
      data.agreement.map((g) => [`${g.by}: ${g.key}`, g.kind, g.items, g.pairs, m(g.accuracy), m(g.balanced_accuracy), m(g.kappa), m(g.alpha), m(g.human_alpha)])
    );
  }

  // ---------------------------------------------------------------- rows
  const tbody = document.querySelector("#rows tbody");
  const textInput = document.getElementById("filter-text");
  const statusSelect = document.getElementById("filter-status");
  const more = document.getElementById("more");
  let shown = PAGE;

  function rowStatus(r) {
    return r.error ? "error" : r.status || (r.score === null ? "unscored" : "scored");
  }
  function counts(r) {
    const c = { met: 0, unmet: 0, unscored: 0 };
    for (const x of r.criteria || []) if (x.status in c) c[x.status] += 1;
    return c;
  }
  function haystack(r) {
    if (r._hay === undefined) {
      const parts = [r.id, r.row, r.failure_class, r.unscored_reason, r.error && r.error.code, r.error && r.error.message];
      for (const c of r.criteria || []) parts.push(c.id, c.text, c.status, c.reason, c.evidence);
      for (const v of Object.values(r.inputs || {})) parts.push(v);
      r._hay = parts.filter((p) => p !== undefined && p !== null).join("\n").toLowerCase();
    }
    return r._hay;
  }
  function matches(r) {
    const q = textInput.value.trim().toLowerCase();
    const st = statusSelect.value;
    if (st === "unmet" ? !(r.criteria || []).some((c) => c.status === "unmet") : st !== "all" && rowStatus(r) !== st) return false;
    return !q || haystack(r).includes(q);
  }

  // The text with every occurrence of the quotes marked.
  function highlighted(text, quotes) {
    const spans = [];
    for (const q of quotes) {
      if (!q) continue;
      let at = text.indexOf(q);
      while (at >= 0) {
        spans.push([at, at + q.length]);
        at = text.indexOf(q, at + Math.max(1, q.length));
      }
    }
    spans.sort((a, b) => a[0] - b[0]);
    const merged = [];
    for (const sp of spans) {
      if (merged.length && sp[0] <= merged[merged.length - 1][1]) merged[merged.length - 1][1] = Math.max(merged[merged.length - 1][1], sp[1]);
      else merged.push(sp.slice());
    }
    const pre = el("pre", { class: "input" });
    let pos = 0;
    for (const [a, b] of merged) {
      pre.append(document.createTextNode(text.slice(pos, a)));
      pre.append(el("mark", { class: "evidence" }, text.slice(a, b)));
      pos = b;
    }
    pre.append(document.createTextNode(text.slice(pos)));
    return pre;
  }

  function detail(r) {
    const tr = el("tr", { class: "detail" });
    const td = el("td", { colspan: 6 });
    if (r.error) {
      td.append(el("p", { class: "status-error" }, `error record: ${r.error.code}`), el("p", {}, r.error.message));
    }
    if (r.unscored_reason) td.append(el("p", { class: "muted" }, `unscored: ${r.unscored_reason}`));
    if ((r.gates || []).length) {
      td.append(el("h3", {}, "Gates"));
      const gt = el("table", { class: "small gates" });
      for (const g of r.gates) {
        const row = el("tr");
        const state = g.passed === true ? "passed" : g.passed === false ? "fired" : "not evaluated";
        row.append(el("td", {}, g.name), el("td", { class: "gate-" + state.replace(" ", "-") }, state), el("td", {}, g.reason || ""));
        gt.append(row);
      }
      td.append(gt);
    }
    if ((r.criteria || []).length) {
      td.append(el("h3", {}, "Criteria"));
      const ct = el("table", { class: "small criteria" });
      const head = el("tr");
      ["status", "criterion", "text", "reason", "evidence", "source"].forEach((h) => head.append(el("th", {}, h)));
      ct.append(head);
      for (const c of r.criteria) {
        const row = el("tr", { class: "criterion", "data-id": c.id });
        row.append(
          el("td", { class: "status-" + c.status }, c.status),
          el("td", {}, c.id),
          el("td", {}, c.text || ""),
          el("td", {}, c.reason || ""),
          el("td", { class: c.evidence ? "evidence-text" : "" }, c.evidence || ""),
          el("td", {}, c.source || "")
        );
        ct.append(row);
      }
      td.append(ct);
    }
    const quotes = (r.criteria || []).map((c) => c.evidence).filter(Boolean);
    const inputs = Object.entries(r.inputs || {});
    if (inputs.length) {
      td.append(el("h3", {}, quotes.length ? "Inputs (the judges' evidence marked)" : "Inputs"));
      for (const [k, v] of inputs) {
        td.append(el("div", { class: "muted" }, k));
        td.append(highlighted(v, quotes));
      }
      const missing = quotes.filter((q) => !inputs.some(([, v]) => v.includes(q)));
      if (missing.length) td.append(el("p", { class: "muted" }, `${missing.length} evidence quote(s) not found verbatim in the inputs`));
    }
    tr.append(td);
    return tr;
  }

  function draw() {
    tbody.textContent = "";
    const hits = data.rows.filter(matches);
    for (const r of hits.slice(0, shown)) {
      const c = counts(r);
      const tr = el("tr", { class: "row", "data-row": r.row, tabindex: 0 });
      tr.append(
        el("td", {}, r.row),
        el("td", {}, r.id ?? ""),
        el("td", {}, r.score === null || r.score === undefined ? "–" : fmt(r.score)),
        el("td", { class: "status-" + rowStatus(r) }, rowStatus(r)),
        el("td", {}, r.failure_class || (r.error ? r.error.code : "")),
        el("td", {}, `${c.met} / ${c.unmet} / ${c.unscored}`)
      );
      const toggle = () => {
        const next = tr.nextElementSibling;
        if (next && next.classList.contains("detail")) {
          next.remove();
          tr.classList.remove("open");
        } else {
          tr.after(detail(r));
          tr.classList.add("open");
        }
      };
      tr.addEventListener("click", toggle);
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") toggle(); });
      tbody.append(tr);
    }
    document.getElementById("row-count").textContent = `${Math.min(hits.length, shown)} of ${hits.length} matching rows (${data.rows.length} in all)`;
    more.hidden = hits.length <= shown;
  }
  textInput.addEventListener("input", () => { shown = PAGE; draw(); });
  statusSelect.addEventListener("change", () => { shown = PAGE; draw(); });
  more.addEventListener("click", () => { shown += PAGE; draw(); });
  draw();
  document.body.setAttribute("data-ready", "true");
})();
