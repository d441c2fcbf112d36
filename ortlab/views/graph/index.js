// ortlab graph view: the entry ES module. anywidget loads it as the widget's _esm, and the
// standalone page (GraphView.to_html) imports the very same text. No build step, no network.
//
//   wire.js      the wire form: unpacks the `data` trait (pack(graph)) once per value
//   data.js      data model: visible items, scope groups, search, hover text
//   layout.js    dagre in a blob: Web Worker; a tall chain folded into columns
//   draw.js      canvas, cluster boxes, minimap, view transform
//   labels.js    text in screen pixels (level of detail), edge shapes
//   interact.js  pan, zoom, hover, click, search, fit, colour select, minimap jump
//   overlays.js  colour modes (provider, op_type, time, quant_error) and the legend
//
// Why the modules come as text and are wired here by dependency injection: anywidget takes
// ONE module text and imports it from a blob: URL, and the standalone page allows scripts only
// by sha256 hash plus blob:. A module imported from a blob: URL has no base to resolve
// "./draw.js" against, so the modules cannot import each other. An import map could name
// them, but a page accepts import maps only before its first module loads (JupyterLab loaded
// its own long ago), and in the standalone page it would be one more inline script to hash.
// So Python sends the texts (the `modules` trait, like dagre_src), the entry imports each from
// a blob: URL, and hands every module what it needs as arguments: the modules import nothing.
//
// Every string from the model reaches the page through textContent or canvas fillText.

const PARTS = ["wire", "data", "layout", "overlays", "labels", "draw", "interact"];
const imported = new Map();  // module text -> import() promise, shared by every view

function importText(text) {
  if (!imported.has(text)) {
    const url = URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
    imported.set(text, import(url).finally(() => URL.revokeObjectURL(url)));
  }
  return imported.get(text);
}

function moduleTexts(model) {
  const texts = model.get("modules") || {};
  const missing = PARTS.filter((p) => typeof texts[p] !== "string");
  if (missing.length) throw new Error(`ortlab graph view: modules missing: ${missing.join(", ")}`);
  return texts;
}

// name -> module. Each blob: import costs a few ms (Chromium fetches the blob through its
// browser process), so render() imports layout.js alone first and starts the worker: its
// start-up (parsing dagre) then overlaps the other imports (first paint ~10 ms sooner).
async function importModules(texts) {
  const mods = await Promise.all(PARTS.map((p) => importText(texts[p])));
  return Object.fromEntries(PARTS.map((p, i) => [p, mods[i]]));
}

function element(tag, className, cssText) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (cssText) e.style.cssText = cssText;
  return e;
}

function buildDom(el, colorModes) {
  el.classList.add("ortlab-graph");
  el.style.cssText = "position:relative;font:12px sans-serif;border:1px solid #ddd;";
  const bar = element("div", "", "display:flex;gap:6px;align-items:center;padding:4px;background:#f7f7f7;");
  const select = element("select", "ortlab-color-by");
  for (const m of colorModes) {
    const o = document.createElement("option");
    o.value = m; o.textContent = "colour: " + m; select.appendChild(o);
  }
  const search = element("input", "ortlab-search");
  search.placeholder = "search node or op";
  const fit = element("button", "ortlab-fit");
  fit.textContent = "fit";
  const status = element("span", "ortlab-status");
  bar.append(select, search, fit, status);
  const canvas = element("canvas", "ortlab-canvas", "display:block;width:100%;height:clamp(420px, calc(100vh - 200px), 1600px);cursor:grab;");
  const tip = element("div", "ortlab-tooltip", "position:absolute;display:none;pointer-events:none;" +
    "background:#fff;border:1px solid #999;padding:4px 6px;max-width:420px;white-space:pre-wrap;z-index:10;");
  const mini = element("canvas", "ortlab-minimap", "position:absolute;right:8px;top:44px;width:140px;" +
    "height:110px;background:rgba(255,255,255,0.85);border:1px solid #bbb;");
  const legend = element("div", "ortlab-legend", "padding:4px;display:flex;gap:10px;flex-wrap:wrap;");
  const details = element("div", "ortlab-details", "position:absolute;display:none;left:8px;top:44px;" +
    "width:360px;max-height:calc(100% - 60px);overflow:auto;background:#fff;border:1px solid #888;padding:6px 8px;" +
    "z-index:11;box-shadow:0 2px 6px rgba(0,0,0,0.2);font:12px sans-serif;");
  const help = element("div", "ortlab-keys", "padding:0 4px 4px;color:#555;font-size:11px;");
  help.textContent = "click a node: details · click a group: open it · f: fit · /: search · Esc: close";
  el.tabIndex = 0;  // keys (f, /, Esc) reach the view
  el.append(bar, canvas, legend, help, tip, mini, details);
  return { select, search, fit, status, canvas, tip, mini, legend, details };
}

// The model's nodes as the model card counts them: those drawn, and those folded into their
// consumers (Constant nodes, Identity nodes passing a weight on) said apart.
function nodeCount(g) {
  const drawn = g.nodes.length, c = g.constants || 0, i = g.identities || 0;
  const fmt = (n) => n.toLocaleString("en-US");
  if (!c && !i) return `${fmt(drawn)} nodes`;
  const parts = [c ? `${fmt(c)} Constant` : "", i ? `${fmt(i)} weight Identity` : ""];
  const folded = parts.filter(Boolean).join(" + ");
  return `${fmt(drawn + c + i)} nodes (${fmt(drawn)} drawn, ${folded} folded into their consumers)`;
}

// A finished layout: report it (status line, _layout_ms trait, data-* attributes read by the
// tests and benchmarks), fit, and centre the node a search asked for, if any.
function showLayout(s, lib, shown, ms, repaint) {
  s.dom.status.textContent = `${nodeCount(s.graph)} · ${shown} shown · layout ${ms} ms`;
  s.model.set("_layout_ms", ms);
  s.el.dataset.layoutMs = String(ms);
  s.el.dataset.shown = String(shown);
  s.model.save_changes();
  lib.draw.fitView(s);
  const focus = s.pendingFocus && s.layout.nodes.get(s.pendingFocus);
  s.pendingFocus = null;
  if (focus) { s.view.k = Math.max(s.view.k, 1); lib.draw.centerOn(s, focus.x, focus.y); }
  repaint();
}

function relayout(s, lib, layouter, repaint) {
  performance.mark("ortlab:relayout");  // the marks time the steps for the benchmarks
  s.graph = lib.wire.graphOf(s.model.get("data"));  // unpacked once per data value
  lib.overlays.useColors(s.graph.colors);
  performance.mark("ortlab:unpacked");
  s.vis = lib.data.visibleItems(s.graph, s.model.get("expanded"));
  performance.mark("ortlab:visible");
  const shown = s.vis.items.size;
  s.dom.status.textContent = `laying out ${shown} items…`;
  layouter.run(s.vis, (result, ms) => {
    if (result.error) { s.dom.status.textContent = "layout failed: " + result.error; return; }
    const canvas = s.dom.canvas;  // a tall chain is folded into columns that fit the canvas
    s.layout = lib.layout.foldColumns(result, { w: canvas.clientWidth || 800, h: canvas.clientHeight || 520 }, s.vis.items);
    s.el.dataset.columns = String(s.layout.columns);
    performance.mark("ortlab:laid-out");
    showLayout(s, lib, shown, ms, repaint);
    performance.mark("ortlab:painted");
  });
}

async function render({ model, el }) {
  performance.mark("ortlab:render");
  const texts = moduleTexts(model);
  const layouter = (await importText(texts.layout)).createLayouter(model.get("dagre_src"));
  const lib = await importModules(texts);
  const dom = buildDom(el, lib.overlays.COLOR_MODES);
  const s = { model, el, dom, view: { x: 0, y: 0, k: 1 }, graph: null, layout: null, vis: null, drag: null,
    searchHits: new Set(), pendingFocus: null, miniScale: null };
  const repaint = () => lib.draw.paint(s, lib.overlays, lib.data.stats, lib.labels);
  const layoutAgain = () => relayout(s, lib, layouter, repaint);
  const unwire = lib.interact.wire(s, lib, repaint);
  model.on("change:color_by", () => { dom.select.value = model.get("color_by"); repaint(); });
  model.on("change:highlighted", repaint);
  model.on("change:selected", () => { lib.interact.showSelected(s, lib); repaint(); });
  model.on("change:expanded", layoutAgain);
  model.on("change:data", layoutAgain);
  dom.select.value = model.get("color_by");
  layoutAgain();
  lib.interact.showSelected(s, lib);  // selected before the view was shown (the Lab's lists)
  return () => { layouter.terminate(); unwire(); };
}

export default { render };
