// Text: item labels and edge shapes, drawn in screen pixels after the shapes (draw.js calls
// drawLabels with the canvas context). A label is never drawn below 10 px: an item too small
// on screen shows none (level of detail hides text instead of scaling it). No imports; model
// strings reach the canvas through fillText only.

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

// Zoomed in: each edge's tensor shape ("[1, 64, 56, 56]") beside its midpoint, in screen pixels.
function edgeShapes(ctx, s, v) {
  const tensors = s.graph.tensors;
  const meta = new Map(s.vis.edges.map((x) => [x.v + ">" + x.w, x]));
  ctx.font = `${SUB_PX}px sans-serif`;
  ctx.fillStyle = "#666";
  for (const e of s.layout.edges) {
    const m = meta.get(e.v + ">" + e.w), pts = e.points || [];
    if (!m || !pts.length || !tensors.get(m.tensor)) continue;
    const p = pts[Math.floor(pts.length / 2)];
    const shape = String(tensors.get(m.tensor)).replace(/ \((initializer|constant)\)$/, "");
    ctx.fillText(fitText(shape, 140), v.x + p.x * v.k + 4, v.y + p.y * v.k);
  }
}

// Labels are drawn in screen pixels, never shrunk: an item too small on screen for an 11 px
// line shows none (level of detail hides text instead of scaling it below 10 px).
function itemLines(it) {
  if (it.kind === "group") {
    const [id, ...rest] = String(it.label).split(":");
    const eps = Object.keys(it.providers || {}).map((p) => p.replace("ExecutionProvider", ""));
    const content = rest.join(":").trim() || id;
    const cross = it.boundaries ? ` · ${it.boundaries} EP boundar${it.boundaries > 1 ? "ies" : "y"}` : "";
    const time = it.share > 0 ? ` · ${(100 * it.share).toFixed(1)}%` : "";  // of the measured time
    return [`▸ ${content}${time}`, `${id.trim()} · ${it.size} nodes${eps.length ? " · " + eps.join("+") : ""}${cross}`];
  }
  if (it.kind === "io") return [it.name, `graph ${it.op_type}`];
  return [it.op_type, it.name];
}

// Weights and constants folded into a node, as Netron shows them: "W 64×3×7×7".
function weightLine(it, tensors) {
  const parts = [];
  for (const t of it.inputs || []) {
    const ty = tensors.get(t) || "";
    const m = /\[([^\]]*)\] \((initializer|constant)\)$/.exec(ty);
    if (m) parts.push(m[1] ? m[1].split(", ").join("×") : "scalar");
  }
  return parts.length ? "⟨" + parts.join("⟩ ⟨") + "⟩" : "";
}

export function drawLabels(ctx, s, fill, dpr) {
  const v = s.view;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  let drawn = 0, minPx = Infinity, whole = 0;
  const cw = s.dom.canvas.clientWidth, ch = s.dom.canvas.clientHeight;
  for (const [key, n] of s.layout.nodes) {
    const it = s.vis.items.get(key);
    const sw = n.width * v.k, sh = n.height * v.k;
    const sx = v.x + (n.x - n.width / 2) * v.k, sy = v.y + (n.y - n.height / 2) * v.k;
    if (sx >= 0 && sy >= 0 && sx + sw <= cw && sy + sh <= ch) whole += 1;
    if (sh < LABEL_PX + 4 || sw < 36) continue;
    const [head, sub] = itemLines(it);
    ctx.fillStyle = ink(fill(it));
    ctx.font = `${LABEL_PX}px sans-serif`;
    ctx.fillText(fitText(head, sw - 8), sx + 4, sy + Math.min(sh / 2 + 4, LABEL_PX + 3));
    drawn += 1; minPx = Math.min(minPx, LABEL_PX);
    if (sh >= LABEL_PX + SUB_PX + 6) {
      ctx.font = `${SUB_PX}px sans-serif`;
      const text = it.kind === "group" ? sub : String(sub).slice(-Math.floor((sw - 8) / 6));
      ctx.fillText(fitText(text, sw - 8), sx + 4, sy + LABEL_PX + SUB_PX + 5);
      minPx = Math.min(minPx, SUB_PX);
    }
    if (it.kind === "node" && sh >= LABEL_PX + 2 * SUB_PX + 12) {
      const w = weightLine(it, s.graph.tensors);
      if (w) ctx.fillText(fitText(w, sw - 8), sx + 4, sy + LABEL_PX + 2 * SUB_PX + 8);
    }
  }
  if (v.k >= 1.1) edgeShapes(ctx, s, v);
  s.el.dataset.labels = String(drawn);  // read by the browser tests
  s.el.dataset.onScreen = String(whole);  // items wholly inside the canvas
  s.el.dataset.minLabelPx = drawn ? String(minPx) : "";
}

