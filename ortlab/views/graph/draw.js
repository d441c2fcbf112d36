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
  const k = Math.max(fitK, Math.min(0.5, w / (x1 - x0 + 40)));  // 0.5: a node's 11 px name shows
  // a picture too tall to fit, or folded into columns to fit, starts at its top: the canvas
  // is often taller than what shows of it below the Lab's controls
  const top = fitK < k || (s.layout.columns || 1) > 1;
  s.view = { k, x: w / 2 - k * (x0 + x1) / 2, y: top ? 20 - k * y0 : h / 2 - k * (y0 + y1) / 2 };
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

// A control-flow body (an If's then_branch / else_branch, a Loop's body) drawn open: a frame
// around everything laid out inside it, named by its owner, the attribute, the condition it
// runs on and, after a run, whether it ran (an optimum merged decoder holds its network twice,
// in two branches of one If; only one runs in a given step).
function bodyFrames(s) {
  const bodies = s.graph.groups.filter((g) => g.label.includes(" \u25b8 ") && !g.label.includes("/"));
  if (!bodies.length) return [];
  const nodes = new Map(s.graph.nodes.map((n) => [n.name, n]));
  const frames = bodies.map((g) => {
    const [owner, attr] = g.label.split(" \u25b8 ");
    const op = nodes.get(owner), cond = op && op.op_type === "If" ? op.inputs[0] : "";
    const when = cond ? (attr === "then_branch" ? `${cond} true` : attr === "else_branch" ? `${cond} false` : "") : "";
    const ran = s.graph.has_time ? (g.us_per_run > 0 ? " \u00b7 ran in these runs" : " \u00b7 did not run") : "";
    return { id: g.id, label: `${g.label}${when ? " (when " + when + ")" : ""}${ran}`, x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity, n: 0 };
  });
  for (const [key, n] of s.layout.nodes) {
    const it = s.vis.items.get(key);
    const gid = it.kind === "group" ? it.id : it.group || "";
    for (const f of frames) {
      if (gid !== f.id && !gid.startsWith(f.id + "/")) continue;
      f.x0 = Math.min(f.x0, n.x - n.width / 2); f.x1 = Math.max(f.x1, n.x + n.width / 2);
      f.y0 = Math.min(f.y0, n.y - n.height / 2); f.y1 = Math.max(f.y1, n.y + n.height / 2);
      f.n += 1;
    }
  }
  return frames.filter((f) => f.n > 1);
}

function drawBodies(ctx, s) {
  const k = Math.max(s.view.k, 0.05), pad = 14, frames = bodyFrames(s);
  s.el.dataset.bodies = frames.map((f) => f.label).join("\n");  // read by the tests
  for (const f of frames) {
    const ran = f.label.endsWith("ran in these runs"), idle = f.label.endsWith("did not run");
    ctx.fillStyle = ran ? "rgba(44,160,44,0.05)" : "rgba(0,0,0,0.025)";
    ctx.strokeStyle = ran ? "rgba(44,160,44,0.9)" : "rgba(0,0,0,0.45)";
    ctx.lineWidth = 2 / k;
    ctx.setLineDash(idle ? [6 / k, 4 / k] : []);
    const x = f.x0 - pad, y = f.y0 - pad - 18 / k, w = f.x1 - f.x0 + 2 * pad, h = f.y1 - y + pad;
    ctx.fillRect(x, y, w, h);
    ctx.strokeRect(x, y, w, h);
    ctx.setLineDash([]);
    ctx.fillStyle = ran ? "#1b6e1b" : "#444";
    ctx.font = `bold ${12 / k}px sans-serif`;  // 12 px on screen at any zoom
    let text = f.label;
    while (text.length > 8 && ctx.measureText(text).width > w - 8 / k) text = text.slice(0, -2);
    ctx.fillText(text === f.label ? text : text.slice(0, -1) + "\u2026", x + 4 / k, y + 14 / k);
  }
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

// A collapsed group that holds several EPs: a bar of their shares along its bottom edge.
function mixBar(ctx, it, x, y, w, colors) {
  const entries = Object.entries(it.providers || {});
  if (entries.length < 2) return;
  const total = entries.reduce((a, [, c]) => a + c, 0);
  let at = x;
  for (const [p, c] of entries) {
    ctx.fillStyle = colors(p);
    ctx.fillRect(at, y, (w * c) / total, 6);
    at += (w * c) / total;
  }
}

function drawNodes(ctx, s, fill, band, colors) {
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
    } else mixBar(ctx, it, x, y + n.height - 6, n.width, colors);
    if (it.predicted) hatch(ctx, x, y, n.width, n.height);
    const hit = it.kind === "node" && (highlighted.has(it.name) || s.searchHits.has(it.name));
    const crossed = it.kind === "group" && it.boundaries > 0;
    ctx.lineWidth = (hit || it.name === selected || crossed ? 3 : 1) / Math.max(s.view.k, 0.3);
    ctx.strokeStyle = it.name === selected ? "#000" : hit ? "#ff00aa" : crossed ? "#d62728" : "#555";
    ctx.strokeRect(x, y, n.width, n.height);
    if (it.kind === "group" && !crossed) {  // a group reads as a stack of nodes: a second edge
      ctx.strokeStyle = "#999";
      ctx.strokeRect(x + 3, y + 3, n.width, n.height);
    }
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
export function paint(s, overlays, stats, labels) {
  if (!s.layout) return;
  // the items changed (a group opened, a new graph) and their layout is still being made:
  // paint when it lands, not the old layout's boxes over items that no longer exist
  for (const key of s.layout.nodes.keys()) if (!s.vis.items.has(key)) return;
  const paintStart = performance.now();
  const canvas = s.dom.canvas, dpr = window.devicePixelRatio || 1, v = s.view;
  const { w, h } = size(canvas);
  canvas.width = w * dpr; canvas.height = h * dpr;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr * v.k, 0, 0, dpr * v.k, dpr * v.x, dpr * v.y);
  ctx.clearRect(-v.x / v.k, -v.y / v.k, w / v.k, h / v.k);
  const data = s.graph, mode = s.model.get("color_by"), st = stats(data);
  const fill = (it) => overlays.colorOf(it, mode, st);
  drawBodies(ctx, s);
  drawEdges(ctx, s);
  drawClusters(ctx, s);
  drawNodes(ctx, s, fill, (it) => overlays.categoryColor(it.op_type), overlays.providerColor);
  labels.drawLabels(ctx, s, fill, dpr);
  overlays.drawLegend(s.dom.legend, data, mode);
  drawMinimap(s, fill);
  // the whole picture on screen: the minimap would only hide part of it
  s.dom.mini.style.display = Number(s.el.dataset.onScreen) === s.layout.nodes.size ? "none" : "";
  s.el.dataset.paintMs = (performance.now() - paintStart).toFixed(2);  // read by benchmarks
}
