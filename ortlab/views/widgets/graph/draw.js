// Drawing: one 2D canvas (edges, cluster boxes, nodes, labels by level of detail), the
// minimap, and the view transform (fit, centre). Colours come from overlays.js, which the
// entry passes in as `overlays`. Model strings reach the canvas through fillText only.
//
// `s` is the view's state, made by index.js: { model, el, dom, view: {x, y, k}, layout, vis,
// searchHits, miniScale }.

function size(canvas) {
  return { w: canvas.clientWidth || 800, h: canvas.clientHeight || 520 };
}

function bounds(layout) {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const n of layout.nodes.values()) {
    x0 = Math.min(x0, n.x - n.width / 2); x1 = Math.max(x1, n.x + n.width / 2);
    y0 = Math.min(y0, n.y - n.height / 2); y1 = Math.max(y1, n.y + n.height / 2);
  }
  return { x0, y0, x1, y1 };
}

// Zoom to show the whole graph, but stay readable: a graph too tall to fit starts at the top
// at a readable scale, and the user scrolls.
export function fitView(s) {
  if (!s.layout) return;
  const { x0, y0, x1, y1 } = bounds(s.layout);
  const { w, h } = size(s.dom.canvas);
  const fitK = Math.min(w / (x1 - x0 + 40), h / (y1 - y0 + 40), 2);
  const k = Math.max(fitK, Math.min(0.6, w / (x1 - x0 + 40)));
  const y = fitK < k ? 20 - k * y0 : h / 2 - k * (y0 + y1) / 2;
  s.view = { k, x: w / 2 - k * (x0 + x1) / 2, y };
}

export function centerOn(s, gx, gy) {
  const { w, h } = size(s.dom.canvas);
  s.view.x = w / 2 - s.view.k * gx; s.view.y = h / 2 - s.view.k * gy;
}

function drawEdges(ctx, s) {
  const edgeMeta = new Map(s.vis.edges.map((x) => [x.v + ">" + x.w, x]));
  for (const e of s.layout.edges) {
    const meta = edgeMeta.get(e.v + ">" + e.w);
    ctx.strokeStyle = meta && meta.boundary ? "#d62728" : "#999";
    ctx.lineWidth = (meta && meta.boundary ? 3 : 1) / Math.max(s.view.k, 0.3);
    ctx.setLineDash(meta && meta.boundary ? [6, 4] : []);
    ctx.beginPath();
    (e.points || []).forEach((p, i) => (i ? ctx.lineTo(p.x, p.y) : ctx.moveTo(p.x, p.y)));
    ctx.stroke();
  }
  ctx.setLineDash([]);
}

// Boxes behind the nodes: a compiled EP subgraph around its members, a fused node around
// the original nodes it replaced.
function clusterBoxes(s) {
  const boxes = new Map();
  for (const [key, n] of s.layout.nodes) {
    const it = s.vis.items.get(key);
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
  return boxes.values();
}

function drawClusters(ctx, s) {
  for (const b of clusterBoxes(s)) {
    if (b.n < 2 && !b.compiled) continue;
    const pad = b.compiled ? 10 : 5;
    ctx.fillStyle = b.compiled ? "rgba(245,133,24,0.08)" : "rgba(0,0,0,0.035)";
    ctx.strokeStyle = b.compiled ? "rgba(245,133,24,0.9)" : "rgba(0,0,0,0.35)";
    ctx.lineWidth = 1.5 / Math.max(s.view.k, 0.3);
    ctx.setLineDash(b.compiled ? [] : [3, 3]);
    ctx.fillRect(b.x0 - pad, b.y0 - pad, b.x1 - b.x0 + 2 * pad, b.y1 - b.y0 + 2 * pad);
    ctx.strokeRect(b.x0 - pad, b.y0 - pad, b.x1 - b.x0 + 2 * pad, b.y1 - b.y0 + 2 * pad);
    ctx.setLineDash([]);
    if (s.view.k >= 1) {  // 10 px or more on screen
      ctx.fillStyle = "#555"; ctx.font = "10px sans-serif";
      ctx.fillText(b.label.slice(0, 40), b.x0 - pad + 2, b.y0 - pad - 2);
    }
  }
}

// Text on a fill: dark on light colours, white on dark ones.
function ink(fill) {
  let r = 200, g = 200, b = 200;
  const hex = /^#([0-9a-f]{6})$/i.exec(fill || "");
  const rgb = /^rgb\((\d+),\s*(\d+),\s*(\d+)\)$/.exec(fill || "");
  if (hex) { const v = parseInt(hex[1], 16); r = v >> 16; g = (v >> 8) & 255; b = v & 255; }
  else if (rgb) { r = +rgb[1]; g = +rgb[2]; b = +rgb[3]; }
  return 0.299 * r + 0.587 * g + 0.114 * b < 140 ? "#fff" : "#111";
}

function fitText(text, px) {  // ~0.58 em per character in sans-serif
  const max = Math.floor(px / 6.4);
  const t = String(text);
  return t.length <= max ? t : t.slice(0, Math.max(0, max - 1)) + "…";
}

export const LABEL_PX = 11, SUB_PX = 10;

// Labels are drawn in screen pixels, never shrunk: an item too small on screen for an 11 px
// line shows none (level of detail hides text instead of scaling it below 10 px).
function itemLines(it) {
  if (it.kind === "group") {
    const [id, ...rest] = String(it.label).split(":");
    const eps = Object.keys(it.providers || {}).map((p) => p.replace("ExecutionProvider", ""));
    const content = rest.join(":").trim() || id;
    return [`▸ ${content}`, `${id.trim()} · ${it.size} nodes${eps.length ? " · " + eps.join("+") : ""}`];
  }
  return [it.op_type, it.name];
}

function drawLabels(ctx, s, fill, dpr) {
  const v = s.view;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  let drawn = 0, minPx = Infinity;
  for (const [key, n] of s.layout.nodes) {
    const it = s.vis.items.get(key);
    const sw = n.width * v.k, sh = n.height * v.k;
    if (sh < LABEL_PX + 4 || sw < 36) continue;
    const sx = v.x + (n.x - n.width / 2) * v.k, sy = v.y + (n.y - n.height / 2) * v.k;
    const [head, sub] = itemLines(it);
    ctx.fillStyle = ink(fill(it));
    ctx.font = `${LABEL_PX}px sans-serif`;
    ctx.fillText(fitText(head, sw - 8), sx + 4, sy + Math.min(sh / 2 + 4, LABEL_PX + 3));
    drawn += 1; minPx = Math.min(minPx, LABEL_PX);
    if (sh >= LABEL_PX + SUB_PX + 8) {
      ctx.font = `${SUB_PX}px sans-serif`;
      const text = it.kind === "group" ? sub : String(sub).slice(-Math.floor((sw - 8) / 6));
      ctx.fillText(fitText(text, sw - 8), sx + 4, sy + LABEL_PX + SUB_PX + 5);
      minPx = Math.min(minPx, SUB_PX);
    }
  }
  s.el.dataset.labels = String(drawn);  // read by the browser tests
  s.el.dataset.minLabelPx = drawn ? String(minPx) : "";
}

// A predicted placement (ortlab.whatif) is not a run: diagonal white hatching over the fill.
function hatch(ctx, x, y, w, h) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = "rgba(255,255,255,0.7)";
  ctx.lineWidth = 2;
  ctx.beginPath();
  for (let d = -h; d < w; d += 8) {
    ctx.moveTo(x + d, y + h);
    ctx.lineTo(x + d + h, y);
  }
  ctx.stroke();
  ctx.restore();
}

function drawNodes(ctx, s, fill, band) {
  const highlighted = new Set(s.model.get("highlighted"));
  const selected = s.model.get("selected")?.name;
  for (const [key, n] of s.layout.nodes) {
    const it = s.vis.items.get(key);
    const x = n.x - n.width / 2, y = n.y - n.height / 2;
    ctx.fillStyle = fill(it);
    ctx.fillRect(x, y, n.width, n.height);
    if (it.kind === "node") {  // op category as a header band, as Netron colours its nodes
      ctx.fillStyle = band(it);
      ctx.fillRect(x, y, n.width, 4);
    }
    if (it.predicted) hatch(ctx, x, y, n.width, n.height);
    const hit = it.kind === "node" && (highlighted.has(it.name) || s.searchHits.has(it.name));
    ctx.lineWidth = (hit || it.name === selected ? 3 : 1) / Math.max(s.view.k, 0.3);
    ctx.strokeStyle = it.name === selected ? "#000" : hit ? "#ff00aa" : "#555";
    if (it.kind === "group") ctx.setLineDash([4, 2]);
    ctx.strokeRect(x, y, n.width, n.height);
    ctx.setLineDash([]);
  }
}

// Overview: every visible item as a dot, and the viewport as a rectangle (index.js makes a
// click on it jump there, through s.miniScale). Each axis is scaled on its own (at most 8:1
// apart), so a tall thin graph still fills the minimap instead of a one-pixel line.
function drawMinimap(s, fill) {
  const { x0, y0, x1, y1 } = bounds(s.layout);
  const W = 140, H = 110;
  let kx = W / (x1 - x0 + 1), ky = H / (y1 - y0 + 1);
  kx = Math.min(kx, ky * 8); ky = Math.min(ky, kx * 8);
  s.miniScale = { sx: kx, sy: ky, x0, y0 };
  const mini = s.dom.mini;
  mini.width = W; mini.height = H;
  const m = mini.getContext("2d");
  for (const [key, n] of s.layout.nodes) {
    m.fillStyle = fill(s.vis.items.get(key));
    m.fillRect((n.x - n.width / 2 - x0) * kx, (n.y - n.height / 2 - y0) * ky,
      Math.max(2, n.width * kx), Math.max(1, n.height * ky));
  }
  const { w, h } = size(s.dom.canvas), v = s.view;
  m.strokeStyle = "#d00"; m.lineWidth = 1;
  m.strokeRect((-v.x / v.k - x0) * kx, (-v.y / v.k - y0) * ky, (w / v.k) * kx, (h / v.k) * ky);
}

// Repaint everything from s (the layout, the view and the traits) with `overlays` colours.
export function paint(s, overlays, stats) {
  if (!s.layout) return;
  const paintStart = performance.now();
  const canvas = s.dom.canvas, dpr = window.devicePixelRatio || 1, v = s.view;
  const { w, h } = size(canvas);
  canvas.width = w * dpr; canvas.height = h * dpr;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr * v.k, 0, 0, dpr * v.k, dpr * v.x, dpr * v.y);
  ctx.clearRect(-v.x / v.k, -v.y / v.k, w / v.k, h / v.k);
  const data = s.model.get("data"), mode = s.model.get("color_by"), st = stats(data);
  const fill = (it) => overlays.colorOf(it, mode, st);
  drawEdges(ctx, s);
  drawClusters(ctx, s);
  drawNodes(ctx, s, fill, (it) => overlays.categoryColor(it.op_type));
  drawLabels(ctx, s, fill, dpr);
  overlays.drawLegend(s.dom.legend, data, mode);
  drawMinimap(s, fill);
  s.el.dataset.paintMs = (performance.now() - paintStart).toFixed(2);  // read by benchmarks
}
