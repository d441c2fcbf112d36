// ortlab graph view: an anywidget ES module, no build step, no network.
// Layout: dagre (shipped inside the netron package, passed in as source text) in a Web Worker.
// Drawing: one 2D canvas. Every string from the model reaches the page through textContent or
// canvas fillText, never innerHTML.

const PALETTE = {
  CPUExecutionProvider: "#4C78A8", CUDAExecutionProvider: "#54A24B",
  TensorrtExecutionProvider: "#76B7B2", OpenVINOExecutionProvider: "#F58518",
  DmlExecutionProvider: "#B279A2", CoreMLExecutionProvider: "#9D755D",
  QNNExecutionProvider: "#E45756",
};
const CATEGORICAL = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B",
  "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC"];
const NODE_W = 120, NODE_H = 30;

function hashColor(text) {
  let h = 0;
  for (const c of String(text)) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return CATEGORICAL[h % CATEGORICAL.length];
}

function heat(t) {  // 0..1 -> light yellow .. dark red
  const a = [255, 245, 200], b = [165, 15, 21];
  const k = Math.max(0, Math.min(1, t));
  return `rgb(${a.map((v, i) => Math.round(v + (b[i] - v) * k)).join(",")})`;
}

function colorOf(item, mode, stats) {
  if (item.kind === "group") {
    const top = Object.entries(item.providers || {}).sort((x, y) => y[1] - x[1])[0];
    if (mode === "time") return heat(stats.maxTime ? item.us_per_run / stats.maxTime : 0);
    return top ? (PALETTE[top[0]] || hashColor(top[0])) : "#ccc";
  }
  if (mode === "op_type") return hashColor(item.op_type);
  if (mode === "time") return heat(stats.maxTime ? Math.sqrt(item.us_per_run / stats.maxTime) : 0);
  if (mode === "quant_error") {
    if (item.sqnr_db === null || item.sqnr_db === undefined) return "#e8e8e8";
    return heat(1 - Math.max(0, Math.min(1, item.sqnr_db / 40)));  // 0 dB red, 40 dB pale
  }
  return item.provider ? (PALETTE[item.provider] || hashColor(item.provider)) : "#d0d0d0";
}

function visibleItems(data, expanded) {
  const open = new Set(expanded);
  const groups = new Map(data.groups.map((g) => [g.id, g]));
  const owner = (groupId) => {  // outermost collapsed ancestor, or null
    let chain = [];
    for (let g = groupId; g; g = groups.get(g)?.parent) chain.unshift(g);
    for (const g of chain) if (!open.has(g)) return g;
    return null;
  };
  const items = new Map();
  const itemOf = new Map();
  for (const n of data.nodes) {
    const g = n.group ? owner(n.group) : null;
    if (g) {
      if (!items.has("g:" + g)) items.set("g:" + g, { kind: "group", key: "g:" + g, ...groups.get(g) });
      itemOf.set(n.id, "g:" + g);
    } else {
      items.set("n:" + n.id, { kind: "node", key: "n:" + n.id, ...n });
      itemOf.set(n.id, "n:" + n.id);
    }
  }
  const edges = new Map();
  for (const e of data.edges) {
    const a = itemOf.get(e.src), b = itemOf.get(e.dst);
    if (a === b || e.ghost) continue;
    const k = a + ">" + b;
    const prev = edges.get(k);
    edges.set(k, { v: a, w: b, tensor: e.tensor, boundary: e.boundary || (prev && prev.boundary) });
  }
  return { items, edges: [...edges.values()], itemOf };
}

function makeWorker(dagreSrc) {
  const handler = `
self.onmessage = (event) => {
  const { nodes, edges, layout } = event.data;
  try { dagre.layout(nodes, edges, layout, {}); self.postMessage({ nodes, edges }); }
  catch (err) { self.postMessage({ error: String(err) }); }
};`;
  const src = dagreSrc.replace(/export const \{ layout, Graph \} = dagre;\s*$/, "") + handler;
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  return new Worker(url);
}

function render({ model, el }) {
  el.classList.add("ortlab-graph");
  el.style.cssText = "position:relative;font:12px sans-serif;border:1px solid #ddd;";
  const bar = document.createElement("div");
  bar.style.cssText = "display:flex;gap:6px;align-items:center;padding:4px;background:#f7f7f7;";
  const select = document.createElement("select");
  select.className = "ortlab-color-by";
  for (const m of ["provider", "op_type", "time", "quant_error"]) {
    const o = document.createElement("option");
    o.value = m; o.textContent = "colour: " + m; select.appendChild(o);
  }
  const search = document.createElement("input");
  search.placeholder = "search node or op"; search.className = "ortlab-search";
  const fit = document.createElement("button"); fit.textContent = "fit"; fit.className = "ortlab-fit";
  const status = document.createElement("span"); status.className = "ortlab-status";
  bar.append(select, search, fit, status);
  const canvas = document.createElement("canvas");
  canvas.className = "ortlab-canvas";
  canvas.style.cssText = "display:block;width:100%;height:520px;cursor:grab;";
  const tip = document.createElement("div");
  tip.className = "ortlab-tooltip";
  tip.style.cssText = "position:absolute;display:none;pointer-events:none;background:#fff;" +
    "border:1px solid #999;padding:4px 6px;max-width:420px;white-space:pre-wrap;z-index:10;";
  const mini = document.createElement("canvas");
  mini.className = "ortlab-minimap";
  mini.style.cssText = "position:absolute;right:8px;top:44px;width:140px;height:110px;" +
    "background:rgba(255,255,255,0.85);border:1px solid #bbb;";
  const legend = document.createElement("div");
  legend.className = "ortlab-legend";
  legend.style.cssText = "padding:4px;display:flex;gap:10px;flex-wrap:wrap;";
  el.append(bar, canvas, legend, tip, mini);

  const worker = makeWorker(model.get("dagre_src"));
  let view = { x: 0, y: 0, k: 1 }, layout = null, vis = null, hover = null, drag = null;
  let searchHits = new Set();
  let pendingFocus = null;

  function stats() {
    const d = model.get("data");
    let maxTime = 0;
    for (const n of d.nodes) maxTime = Math.max(maxTime, n.us_per_run || 0);
    for (const g of d.groups) maxTime = Math.max(maxTime, g.us_per_run || 0);
    return { maxTime };
  }

  function relayout() {
    const data = model.get("data");
    vis = visibleItems(data, model.get("expanded"));
    const nodes = [...vis.items.values()].map((it) => ({
      v: it.key, width: it.kind === "group" ? NODE_W + 40 : NODE_W,
      height: it.kind === "group" ? NODE_H + 14 : NODE_H,
    }));
    const edges = vis.edges.map((e) => ({ v: e.v, w: e.w, minlen: 1, weight: 1, width: 0,
      height: 0, labeloffset: 10, labelpos: "r" }));
    const opts = { nodesep: 16, ranksep: 22 };
    if (nodes.length > 3000) opts.ranker = "longest-path";
    status.textContent = `laying out ${nodes.length} items…`;
    const started = performance.now();
    worker.onmessage = (msg) => {
      if (msg.data.error) { status.textContent = "layout failed: " + msg.data.error; return; }
      layout = { nodes: new Map(msg.data.nodes.map((n) => [n.v, n])), edges: msg.data.edges };
      status.textContent = `${data.nodes.length} nodes · ${nodes.length} shown · layout ` +
        `${Math.round(performance.now() - started)} ms`;
      model.set("_layout_ms", Math.round(performance.now() - started));
      el.dataset.layoutMs = String(Math.round(performance.now() - started));
      el.dataset.shown = String(nodes.length);
      model.save_changes();
      fitView();
      const focus = pendingFocus && layout.nodes.get(pendingFocus);
      pendingFocus = null;
      if (focus) { view.k = Math.max(view.k, 1); centerOn(focus.x, focus.y); } else draw();
    };
    worker.postMessage({ nodes, edges, layout: opts });
  }

  function fitView() {
    if (!layout) return;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of layout.nodes.values()) {
      x0 = Math.min(x0, n.x - n.width / 2); x1 = Math.max(x1, n.x + n.width / 2);
      y0 = Math.min(y0, n.y - n.height / 2); y1 = Math.max(y1, n.y + n.height / 2);
    }
    const w = canvas.clientWidth || 800, h = canvas.clientHeight || 520;
    const fitK = Math.min(w / (x1 - x0 + 40), h / (y1 - y0 + 40), 2);
    const k = Math.max(fitK, Math.min(0.6, w / (x1 - x0 + 40)));  // stay readable: scroll instead
    const y = fitK < k ? 20 - k * y0 : h / 2 - k * (y0 + y1) / 2;  // too tall: start at the top
    view = { k, x: w / 2 - k * (x0 + x1) / 2, y };
  }

  function draw() {
    if (!layout) return;
    const paintStart = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 800, h = canvas.clientHeight || 520;
    canvas.width = w * dpr; canvas.height = h * dpr;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr * view.k, 0, 0, dpr * view.k, dpr * view.x, dpr * view.y);
    ctx.clearRect(-view.x / view.k, -view.y / view.k, w / view.k, h / view.k);
    const mode = model.get("color_by"), st = stats();
    const highlighted = new Set(model.get("highlighted"));
    const selected = model.get("selected")?.name;
    const edgeMeta = new Map(vis.edges.map((x) => [x.v + ">" + x.w, x]));
    for (const e of layout.edges) {
      const meta = edgeMeta.get(e.v + ">" + e.w);
      ctx.strokeStyle = meta && meta.boundary ? "#d62728" : "#999";
      ctx.lineWidth = (meta && meta.boundary ? 3 : 1) / Math.max(view.k, 0.3);
      ctx.setLineDash(meta && meta.boundary ? [6, 4] : []);
      ctx.beginPath();
      (e.points || []).forEach((p, i) => (i ? ctx.lineTo(p.x, p.y) : ctx.moveTo(p.x, p.y)));
      ctx.stroke();
    }
    ctx.setLineDash([]);
    drawClusters(ctx);
    for (const [key, n] of layout.nodes) {
      const it = vis.items.get(key);
      const x = n.x - n.width / 2, y = n.y - n.height / 2;
      ctx.fillStyle = colorOf(it, mode, st);
      ctx.fillRect(x, y, n.width, n.height);
      const hit = it.kind === "node" && (highlighted.has(it.name) || searchHits.has(it.name));
      ctx.lineWidth = (hit || it.name === selected ? 3 : 1) / Math.max(view.k, 0.3);
      ctx.strokeStyle = it.name === selected ? "#000" : hit ? "#ff00aa" : "#555";
      if (it.kind === "group") ctx.setLineDash([4, 2]);
      ctx.strokeRect(x, y, n.width, n.height);
      ctx.setLineDash([]);
      if (view.k > 0.45) {  // level of detail: labels only when readable
        ctx.fillStyle = "#111";
        ctx.font = "11px sans-serif";
        const head = it.kind === "group" ? String(it.label).split(":")[0] : it.op_type;
        const label = it.kind === "group" ? `▸ ${head} (${it.size} nodes)` : head;
        ctx.fillText(label.slice(0, 26), x + 4, y + 13);
        if (view.k > 0.9) {
          ctx.fillStyle = "#333";
          ctx.font = "9px sans-serif";
          const rest = String(it.label || "").split(":").slice(1).join(":").trim();
          const sub = it.kind === "group"
            ? (rest || Object.keys(it.providers || {}).map((p) => p.replace("ExecutionProvider", "")).join("+"))
            : it.name;
          ctx.fillText(it.kind === "group" ? sub.slice(0, 30) : String(sub).slice(-24), x + 4, y + 25);
        }
      }
    }
    drawLegend(mode, st);
    drawMinimap(mode, st);
    el.dataset.paintMs = (performance.now() - paintStart).toFixed(2);  // read by benchmarks
  }

  // Boxes behind the nodes: a compiled EP subgraph around its members, a fused node around
  // the original nodes it replaced.
  function drawClusters(ctx) {
    const boxes = new Map();
    for (const [key, n] of layout.nodes) {
      const it = vis.items.get(key);
      if (it.kind !== "node" || !it.optimized || !it.optimized.length) continue;
      let id = null, label = "";
      if (it.status === "compiled") { id = "p:" + it.partition; label = `${(it.provider || "").replace("ExecutionProvider", "")} compiled subgraph`; }
      else if (it.status === "fused") { id = "f:" + it.optimized[0]; label = "fused → " + it.optimized[0]; }
      if (!id) continue;
      const b = boxes.get(id) || { x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity, n: 0, label, compiled: it.status === "compiled" };
      b.x0 = Math.min(b.x0, n.x - n.width / 2); b.x1 = Math.max(b.x1, n.x + n.width / 2);
      b.y0 = Math.min(b.y0, n.y - n.height / 2); b.y1 = Math.max(b.y1, n.y + n.height / 2);
      b.n += 1; boxes.set(id, b);
    }
    for (const b of boxes.values()) {
      if (b.n < 2 && !b.compiled) continue;
      const pad = b.compiled ? 10 : 5;
      ctx.fillStyle = b.compiled ? "rgba(245,133,24,0.08)" : "rgba(0,0,0,0.035)";
      ctx.strokeStyle = b.compiled ? "rgba(245,133,24,0.9)" : "rgba(0,0,0,0.35)";
      ctx.lineWidth = 1.5 / Math.max(view.k, 0.3);
      ctx.setLineDash(b.compiled ? [] : [3, 3]);
      ctx.fillRect(b.x0 - pad, b.y0 - pad, b.x1 - b.x0 + 2 * pad, b.y1 - b.y0 + 2 * pad);
      ctx.strokeRect(b.x0 - pad, b.y0 - pad, b.x1 - b.x0 + 2 * pad, b.y1 - b.y0 + 2 * pad);
      ctx.setLineDash([]);
      if (view.k > 0.6) {
        ctx.fillStyle = "#555"; ctx.font = "9px sans-serif";
        ctx.fillText(b.label.slice(0, 40), b.x0 - pad + 2, b.y0 - pad - 2);
      }
    }
  }

  // Overview: every visible item as a dot, and the viewport as a rectangle; click to jump.
  let miniScale = null;
  function drawMinimap(mode, st) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of layout.nodes.values()) {
      x0 = Math.min(x0, n.x - n.width / 2); x1 = Math.max(x1, n.x + n.width / 2);
      y0 = Math.min(y0, n.y - n.height / 2); y1 = Math.max(y1, n.y + n.height / 2);
    }
    const W = 140, H = 110, s = Math.min(W / (x1 - x0 + 1), H / (y1 - y0 + 1));
    miniScale = { s, x0, y0 };
    mini.width = W; mini.height = H;
    const m = mini.getContext("2d");
    for (const [key, n] of layout.nodes) {
      m.fillStyle = colorOf(vis.items.get(key), mode, st);
      m.fillRect((n.x - n.width / 2 - x0) * s, (n.y - n.height / 2 - y0) * s,
        Math.max(1, n.width * s), Math.max(1, n.height * s));
    }
    const w = canvas.clientWidth || 800, h = canvas.clientHeight || 520;
    m.strokeStyle = "#d00"; m.lineWidth = 1;
    m.strokeRect((-view.x / view.k - x0) * s, (-view.y / view.k - y0) * s, (w / view.k) * s, (h / view.k) * s);
  }
  mini.addEventListener("click", (ev) => {
    if (!miniScale) return;
    const r = mini.getBoundingClientRect();
    const gx = (ev.clientX - r.left) / miniScale.s + miniScale.x0;
    const gy = (ev.clientY - r.top) / miniScale.s + miniScale.y0;
    centerOn(gx, gy);
  });

  function centerOn(gx, gy) {
    const w = canvas.clientWidth || 800, h = canvas.clientHeight || 520;
    view.x = w / 2 - view.k * gx; view.y = h / 2 - view.k * gy;
    draw();
  }

  function drawLegend(mode) {
    legend.replaceChildren();
    const d = model.get("data");
    const entries = mode === "provider" ? d.providers.map((p) => [p, PALETTE[p] || hashColor(p)])
      : mode === "op_type" ? [...new Set(d.nodes.map((n) => n.op_type))].slice(0, 16).map((o) => [o, hashColor(o)])
      : mode === "time" ? [["fast", heat(0)], ["slow", heat(1)]]
      : [["0 dB (bad)", heat(1)], ["40 dB (good)", heat(0)], ["no data", "#e8e8e8"]];
    if (!entries.length || (mode === "time" && !d.has_time) || (mode === "quant_error" && !d.has_quant)) {
      const hint = document.createElement("span");
      hint.className = "ortlab-hint";
      hint.textContent = mode === "quant_error"
        ? "no quantization error data: ortlab.graph(m, error=ortlab.quantization_error(m, q))"
        : "no runtime data yet: ortlab.graph(m, placement=ortlab.placement(m)) adds EPs and time";
      legend.appendChild(hint);
      if (!entries.length) return;
    }
    for (const [label, color] of entries) {
      const s = document.createElement("span");
      const sw = document.createElement("span");
      sw.style.cssText = `display:inline-block;width:10px;height:10px;margin-right:3px;background:${color}`;
      s.append(sw, document.createTextNode(label));
      legend.appendChild(s);
    }
    if (d.edges.some((e) => e.boundary)) {
      const s = document.createElement("span");
      s.textContent = "red dashed edge: crosses execution providers";
      legend.appendChild(s);
    }
  }

  function itemAt(px, py) {
    if (!layout) return null;
    const x = (px - view.x) / view.k, y = (py - view.y) / view.k;
    for (const [key, n] of layout.nodes) {
      if (Math.abs(x - n.x) <= n.width / 2 && Math.abs(y - n.y) <= n.height / 2) return vis.items.get(key);
    }
    return null;
  }

  function describe(it) {
    if (it.kind === "group") {
      return `${it.id}\n${it.size} nodes · ${Object.entries(it.providers || {}).map(([p, c]) => `${p}: ${c}`).join(", ")}` +
        `\n${(it.us_per_run || 0).toFixed(1)} µs/run · click to expand`;
    }
    const lines = [`${it.name}`, `${it.domain ? it.domain + "." : ""}${it.op_type}`];
    if (it.provider) lines.push(`EP: ${it.provider}`);
    if (it.us_per_run) lines.push(`time: ${it.us_per_run.toFixed(1)} µs/run (${(100 * it.share).toFixed(1)}%)`);
    if (it.status) lines.push(`status: ${it.status}${it.optimized.length ? " → " + it.optimized.join(", ") : ""}`);
    if (it.sqnr_db !== null && it.sqnr_db !== undefined) lines.push(`SQNR: ${it.sqnr_db.toFixed(1)} dB`);
    const types = model.get("data").tensors;
    for (const t of it.inputs) if (t) lines.push(`in  ${t}: ${types[t] || "?"}`);
    for (const t of it.outputs) if (t) lines.push(`out ${t}: ${types[t] || "?"}`);
    for (const [k, v] of Object.entries(it.attrs || {})) lines.push(`${k} = ${v}`);
    return lines.join("\n");
  }

  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const mx = ev.clientX - r.left, my = ev.clientY - r.top;
    const f = Math.exp(-ev.deltaY * 0.0015);
    view = { k: view.k * f, x: mx - (mx - view.x) * f, y: my - (my - view.y) * f };
    draw();
  }, { passive: false });
  canvas.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, moved: false }; });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    if (drag && (ev.buttons & 1)) {
      view.x += ev.clientX - drag.x; view.y += ev.clientY - drag.y;
      drag.moved = drag.moved || Math.abs(ev.clientX - drag.x) + Math.abs(ev.clientY - drag.y) > 2;
      drag.x = ev.clientX; drag.y = ev.clientY; draw(); return;
    }
    hover = itemAt(ev.clientX - r.left, ev.clientY - r.top);
    if (hover) {
      tip.textContent = describe(hover);
      tip.style.display = "block";
      tip.style.left = `${ev.clientX - r.left + 12}px`;
      tip.style.top = `${ev.clientY - r.top + 40}px`;
    } else tip.style.display = "none";
  });
  canvas.addEventListener("click", (ev) => {
    if (drag && drag.moved) return;
    const r = canvas.getBoundingClientRect();
    const it = itemAt(ev.clientX - r.left, ev.clientY - r.top);
    if (!it) return;
    if (it.kind === "group") {
      model.set("expanded", [...model.get("expanded"), it.id]);
    } else {
      const { kind, key, ...node } = it;
      model.set("selected", node);
    }
    model.save_changes();
  });
  select.addEventListener("change", () => { model.set("color_by", select.value); model.save_changes(); });
  search.addEventListener("input", () => {
    const q = search.value.trim().toLowerCase();
    searchHits = new Set(q ? model.get("data").nodes
      .filter((n) => n.name.toLowerCase().includes(q) || n.op_type.toLowerCase().includes(q))
      .map((n) => n.name) : []);
    draw();
  });
  search.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter" || !searchHits.size) return;
    const name = [...searchHits][0];
    const node = model.get("data").nodes.find((n) => n.name === name);
    const key = vis.itemOf.get(node.id);
    if (key && key.startsWith("g:")) {  // inside a collapsed group: open its scopes first
      const open = new Set(model.get("expanded"));
      for (let g = node.group; g; g = g.slice(0, g.lastIndexOf("/"))) open.add(g);
      pendingFocus = key === "n:" + node.id ? null : "n:" + node.id;
      model.set("expanded", [...open]); model.save_changes();
      return;
    }
    const n = layout.nodes.get(key);
    if (n) centerOn(n.x, n.y);
  });
  // Double-click a node: collapse the scope group it belongs to.
  canvas.addEventListener("dblclick", (ev) => {
    const r = canvas.getBoundingClientRect();
    const it = itemAt(ev.clientX - r.left, ev.clientY - r.top);
    if (!it || it.kind !== "node" || !it.group) return;
    model.set("expanded", model.get("expanded").filter((g) => g !== it.group && !g.startsWith(it.group + "/")));
    model.save_changes();
  });
  fit.addEventListener("click", () => { fitView(); draw(); });
  model.on("change:color_by", () => { select.value = model.get("color_by"); draw(); });
  model.on("change:highlighted", draw);
  model.on("change:selected", draw);
  model.on("change:expanded", relayout);
  model.on("change:data", relayout);
  select.value = model.get("color_by");
  relayout();
  return () => worker.terminate();
}

export default { render };
