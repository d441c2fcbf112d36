// Layout: dagre (netron's standalone copy, passed in as source text through the dagre_src
// trait) runs in a Web Worker made from a blob: URL, so a large graph never blocks the page.
// No imports; no model string is ever evaluated (the worker gets the item keys as data).

export const NODE_W = 120, NODE_H = 30;

function makeWorker(dagreSrc) {
  const handler = `
self.onmessage = (event) => {
  const { nodes, edges, layout, id } = event.data;
  try { dagre.layout(nodes, edges, layout, {}); self.postMessage({ nodes, edges, id }); }
  catch (err) { self.postMessage({ error: String(err), id }); }
};`;
  const src = dagreSrc.replace(/export const \{ layout, Graph \} = dagre;\s*$/, "") + handler;
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  return new Worker(url);
}

// A scope group's box is as wide as its name at half zoom (the scale a tall picture fits at;
// labels are 11 px on screen, ~6.4 px a character): "Conv ×3 + Mul ×6 (+10 more) · 4.9%".
function groupWidth(it) {
  const label = String(it.label), text = label.length - label.indexOf(":") + 12;  // as labels.js heads it
  return Math.min(720, Math.max(NODE_W + 130, 2 * (6.4 * text + 16)));
}

// dagre's input for the visible items of data.visibleItems().
export function layoutRequest(vis) {
  const nodes = [...vis.items.values()].map((it) => ({
    v: it.key, width: it.kind === "group" ? groupWidth(it) : NODE_W,
    height: it.kind === "group" ? NODE_H + 16 : NODE_H,
  }));
  const edges = vis.edges.map((e) => ({ v: e.v, w: e.w, minlen: 1, weight: 1, width: 0,
    height: 0, labeloffset: 10, labelpos: "r" }));
  const opts = { nodesep: 16, ranksep: 18 };
  if (nodes.length > 3000) opts.ranker = "longest-path";
  return { nodes, edges, layout: opts };
}

// One worker per view. run(vis, done) lays out the visible items and calls
// done({ nodes: Map(key -> {x, y, width, height}), edges } or { error }, ms); a later run
// replaces an earlier one, whose result (still computed by the worker) is dropped: it would
// describe items that are no longer the visible ones.
export function createLayouter(dagreSrc) {
  const worker = makeWorker(dagreSrc);
  let latest = 0;
  return {
    run(vis, done) {
      const request = { ...layoutRequest(vis), id: ++latest };
      const started = performance.now();
      worker.onmessage = (msg) => {
        if (msg.data.id !== latest) return;
        const ms = Math.round(performance.now() - started);
        if (msg.data.error) { done({ error: msg.data.error }, ms); return; }
        done({ nodes: new Map(msg.data.nodes.map((n) => [n.v, n])), edges: msg.data.edges }, ms);
      };
      worker.postMessage(request);
    },
    terminate: () => worker.terminate(),
  };
}

// A tall, narrow picture (a model without name scopes cut into a chain of 24 blocks) fitted
// whole is too small to read, so the first fit showed its top third. Such a layout is folded
// into columns read left to right, as many as let "fit" show it all at the largest scale
// (never more than 6), like a newspaper page. A fold goes only where the chain is narrow: at
// most two edges cross it and no fused or compiled cluster spans it. An edge across a fold
// runs down out of its column, along the gap, up over the next column, and down into its
// node. `size`: the canvas's { w, h } in screen pixels; `items`: the visible items by key.
// Returns the layout, with `columns` (1 when left as it was).
const FOLD_GAP = 70, MAX_COLUMNS = 6;

function clusterOf(it) {
  if (!it || it.kind !== "node" || !it.optimized || !it.optimized.length) return null;
  if (it.status === "compiled") return "p:" + it.partition;
  return it.status === "fused" ? "f:" + it.optimized[0] : null;
}

function foldCuts(nodes, edges, items) {
  const order = [...nodes.entries()].sort((a, b) => (a[1].y - a[1].height / 2) - (b[1].y - b[1].height / 2));
  const cuts = [];
  let bottom = -Infinity;
  for (const [, n] of order) {
    const top = n.y - n.height / 2;
    if (bottom > -Infinity && top > bottom + 1) cuts.push((bottom + top) / 2);
    bottom = Math.max(bottom, n.y + n.height / 2);
  }
  const spans = new Map();  // cluster -> [lowest y, highest y] of its members
  for (const [key, n] of nodes) {
    const c = clusterOf(items.get(key));
    if (!c) continue;
    const s = spans.get(c) || [Infinity, -Infinity];
    spans.set(c, [Math.min(s[0], n.y), Math.max(s[1], n.y)]);
  }
  return cuts.filter((y) => {
    let crossing = 0;
    for (const e of edges) {
      const a = nodes.get(e.v), b = nodes.get(e.w);
      if (a && b && Math.min(a.y, b.y) < y && y < Math.max(a.y, b.y)) crossing += 1;
    }
    return crossing <= 2 && ![...spans.values()].some(([lo, hi]) => lo < y && y < hi);
  });
}

// The cuts nearest to `want` even splits of [y0, y0 + H], in order (fewer when the allowed
// ones run out), and the columns they make: each one's bounds, and its offset when the
// columns are packed side by side, each as wide as its own nodes.
function columnsFor(nodes, allowed, want, y0, H) {
  const cuts = [];
  for (let j = 1; j < want; j++) {
    const target = y0 + (H * j) / want, after = cuts.length ? cuts[cuts.length - 1] : -Infinity;
    let best = null;
    for (const y of allowed) if (y > after && (best === null || Math.abs(y - target) < Math.abs(best - target))) best = y;
    if (best !== null && Math.abs(best - target) < H / want / 2) cuts.push(best);
  }
  const column = (y) => cuts.filter((c) => c < y).length;
  const cols = cuts.concat([Infinity]).map(() => ({ x0: Infinity, x1: -Infinity, y0: Infinity, y1: -Infinity }));
  for (const n of nodes.values()) {
    const b = cols[column(n.y)];
    b.x0 = Math.min(b.x0, n.x - n.width / 2); b.x1 = Math.max(b.x1, n.x + n.width / 2);
    b.y0 = Math.min(b.y0, n.y - n.height / 2); b.y1 = Math.max(b.y1, n.y + n.height / 2);
  }
  let at = 0;
  for (const b of cols) { b.at = at; at += b.x1 - b.x0 + FOLD_GAP; }
  return { column, cols, width: at - FOLD_GAP, height: Math.max(...cols.map((b) => b.y1 - b.y0)) };
}

function foldEdges(layout, plan, top) {
  const { column, cols } = plan, nodes = layout.nodes;
  const shift = (p, c) => ({ x: p.x - cols[c].x0 + cols[c].at, y: p.y - cols[c].y0 + top });
  return layout.edges.map((e) => {
    const a = nodes.get(e.v), b = nodes.get(e.w), pts = e.points || [];
    if (!a || !b || !pts.length) return e;
    const ca = column(a.y), cb = column(b.y);
    if (ca === cb) return { ...e, points: pts.map((p) => shift(p, ca)) };
    const from = shift(pts[0], ca), to = shift(pts[pts.length - 1], cb);
    const low = cols[ca].y1 - cols[ca].y0 + top + 14, high = top - 14;
    const gap = cols[ca].at + cols[ca].x1 - cols[ca].x0 + FOLD_GAP / 2;
    return { ...e, points: [from, { x: from.x, y: low }, { x: gap, y: low }, { x: gap, y: high },
      { x: to.x, y: high }, to] };
  });
}

export function foldColumns(layout, size, items) {
  const nodes = layout.nodes;
  if (nodes.size < 8 || nodes.size > 400) return { ...layout, columns: 1 };
  const allowed = foldCuts(nodes, layout.edges, items);
  const scale = (p) => Math.min(size.w / (p.width + 40), size.h / (p.height + 70), 2);
  let best = columnsFor(nodes, [], 1, 0, 0);
  const y0 = best.cols[0].y0, H = best.height, flat = scale(best);
  if (flat >= 0.5) return { ...layout, columns: 1 };  // fits at a readable scale as it is
  for (let c = 2; c <= MAX_COLUMNS && allowed.length; c++) {
    const plan = columnsFor(nodes, allowed, c, y0, H);
    if (scale(plan) > scale(best) && scale(plan) > flat * 1.1) best = plan;
  }
  if (best.cols.length === 1) return { ...layout, columns: 1 };
  const moved = new Map();
  for (const [key, n] of nodes) {
    const b = best.cols[best.column(n.y)];
    moved.set(key, { ...n, x: n.x - b.x0 + b.at, y: n.y - b.y0 + y0 });
  }
  return { nodes: moved, edges: foldEdges(layout, best, y0), columns: best.cols.length };
}
