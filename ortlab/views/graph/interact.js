// Interaction: pan (drag), zoom (wheel), hover tooltip, click a node to select it or a group to
// open it, double-click to close a node's scope, search (+ Enter to focus), the fit button, the
// colour select and the minimap. Writes the traits selected, expanded and color_by.
//
// wire(s, lib, repaint) takes the view state `s` (index.js), `lib` = { data, draw } (the
// modules, passed in by the entry) and `repaint()`; it returns a function that removes the
// listeners it put outside the view's element.

export function itemAt(s, px, py) {
  if (!s.layout) return null;
  const x = (px - s.view.x) / s.view.k, y = (py - s.view.y) / s.view.k;
  for (const [key, n] of s.layout.nodes) {
    if (Math.abs(x - n.x) <= n.width / 2 && Math.abs(y - n.y) <= n.height / 2) return s.vis.items.get(key);
  }
  return null;
}

function itemUnder(s, ev) {
  const r = s.dom.canvas.getBoundingClientRect();
  return itemAt(s, ev.clientX - r.left, ev.clientY - r.top);
}

function save(model, key, value) {
  model.set(key, value);
  model.save_changes();
}

function wirePanZoom(s, repaint) {
  const canvas = s.dom.canvas;
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect(), v = s.view;
    const mx = ev.clientX - r.left, my = ev.clientY - r.top;
    const f = Math.exp(-ev.deltaY * 0.0015);
    s.view = { k: v.k * f, x: mx - (mx - v.x) * f, y: my - (my - v.y) * f };
    repaint();
  }, { passive: false });
  canvas.addEventListener("mousedown", (ev) => { s.drag = { x: ev.clientX, y: ev.clientY, moved: false }; });
  const up = () => { setTimeout(() => { s.drag = null; }, 0); };
  window.addEventListener("mouseup", up);
  return () => window.removeEventListener("mouseup", up);
}

// Dragging pans the view; otherwise the tooltip describes the item under the pointer.
function wireHover(s, lib, repaint) {
  const { canvas, tip } = s.dom;
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect(), drag = s.drag;
    if (drag && (ev.buttons & 1)) {
      s.view.x += ev.clientX - drag.x; s.view.y += ev.clientY - drag.y;
      drag.moved = drag.moved || Math.abs(ev.clientX - drag.x) + Math.abs(ev.clientY - drag.y) > 2;
      drag.x = ev.clientX; drag.y = ev.clientY; repaint(); return;
    }
    const hover = itemAt(s, ev.clientX - r.left, ev.clientY - r.top);
    if (!hover || (hover.kind === "node" && hover.name === s.model.get("selected")?.name)) {
      tip.style.display = "none"; return;  // the details panel already shows the selected node
    }
    tip.textContent = lib.data.describe(hover, s.graph.tensors);
    tip.style.display = "block";
    tip.style.left = `${ev.clientX - r.left + 12}px`;
    tip.style.top = `${ev.clientY - r.top + 40}px`;
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
}

function wireClicks(s, lib) {
  const { canvas } = s.dom, model = s.model;
  canvas.addEventListener("click", (ev) => {
    if (s.drag && s.drag.moved) return;
    const it = itemUnder(s, ev);
    if (!it) return;
    if (it.kind === "group") { save(model, "expanded", [...model.get("expanded"), it.id]); return; }
    if (it.kind === "io") return;  // a graph input/output: its hover text says it all
    const { kind, key, ...node } = it;
    s.clicked = node.name;  // selected here: no need to move the view to it
    save(model, "selected", node);
    s.dom.tip.style.display = "none";
  });
  canvas.addEventListener("dblclick", (ev) => {  // close the scope group the node belongs to
    const it = itemUnder(s, ev);
    if (!it || it.kind !== "node" || !it.group) return;
    save(model, "expanded", lib.data.closeScope(model.get("expanded"), it.group));
  });
}

// Centre node `name`; inside a collapsed group, open its scopes first: it is centred after
// the relayout (s.pendingFocus).
export function focusNode(s, lib, name, repaint) {
  const model = s.model;
  const node = s.graph.nodes.find((n) => n.name === name);
  if (!node || !s.vis) return;
  const key = s.vis.itemOf.get(node.id);
  if (key && key.startsWith("g:")) {
    s.pendingFocus = "n:" + node.id;
    save(model, "expanded", lib.data.openScopes(model.get("expanded"), node.group));
    return;
  }
  const n = s.layout && s.layout.nodes.get(key);
  if (n) { s.view.k = Math.max(s.view.k, 1); lib.draw.centerOn(s, n.x, n.y); if (repaint) repaint(); }
  else s.pendingFocus = key;  // not laid out yet: centred when the layout arrives
}

// Enter in the search box: centre the first hit.
function focusFirstHit(s, lib, repaint) {
  if (s.searchHits.size) focusNode(s, lib, [...s.searchHits][0], repaint);
}

// The details panel for the selected node (a click here, or `selected` set from Python or
// the Lab's lists, which also moves the view to it).
function cell(tag, text, css) {
  const c = document.createElement(tag);
  c.textContent = text;  // model strings only ever as text
  if (css) c.style.cssText = css;
  return c;
}

// The details panel: the node's name and op, then one small table per section (placement,
// time, optimization, inputs and outputs with shapes, attributes), as Netron's sidebar.
function fillDetails(panel, sections) {
  panel.replaceChildren();
  const [head, ...rest] = sections;
  panel.append(cell("div", head.rows[0][1], "font-weight:bold;font-size:13px;word-break:break-all;"),
    cell("div", head.rows[1][1], "color:#555;margin-bottom:4px;"));
  for (const sec of rest) {
    panel.append(cell("div", sec.title, "margin:6px 0 2px;color:#777;font-size:11px;" +
      "text-transform:uppercase;letter-spacing:0.04em;border-bottom:1px solid #ddd;"));
    const table = cell("table", "", "border-collapse:collapse;width:100%;table-layout:fixed;");
    for (const [key, value] of sec.rows) {
      const tr = document.createElement("tr");
      tr.append(cell("td", key, "width:38%;padding:1px 6px 1px 0;vertical-align:top;color:#333;" +
        "word-break:break-all;"), cell("td", value, "padding:1px 0;vertical-align:top;word-break:break-word;"));
      table.append(tr);
    }
    panel.append(table);
  }
}

export function showSelected(s, lib) {
  const sel = s.model.get("selected") || {};
  const panel = s.dom.details;
  if (!sel.name) { panel.style.display = "none"; delete panel.dataset.node; return; }
  const node = s.graph.nodes.find((n) => n.name === sel.name) || sel;
  fillDetails(panel, lib.data.details({ kind: "node", ...node }, s.graph.tensors));
  panel.dataset.node = node.name;
  panel.style.display = "block";
  if (s.clicked !== sel.name) focusNode(s, lib, sel.name, null);
  s.clicked = null;
}

function wireKeys(s, lib, repaint) {
  s.el.addEventListener("keydown", (ev) => {
    if (ev.target === s.dom.search) {
      if (ev.key === "Escape") s.dom.search.blur();
      return;
    }
    if (ev.key === "f") { lib.draw.fitView(s); repaint(); }
    else if (ev.key === "/") { ev.preventDefault(); s.dom.search.focus(); }
    else if (ev.key === "Escape") { save(s.model, "selected", {}); s.dom.tip.style.display = "none"; }
  });
}

function wireToolbar(s, lib, repaint) {
  const { select, search, fit } = s.dom;
  select.addEventListener("change", () => save(s.model, "color_by", select.value));
  search.addEventListener("input", () => {
    s.searchHits = lib.data.searchHits(s.graph, search.value);
    repaint();
  });
  search.addEventListener("keydown", (ev) => { if (ev.key === "Enter") focusFirstHit(s, lib, repaint); });
  fit.addEventListener("click", () => { lib.draw.fitView(s); repaint(); });
}

function wireMinimap(s, lib, repaint) {
  const mini = s.dom.mini;
  mini.addEventListener("click", (ev) => {
    if (!s.miniScale) return;
    const r = mini.getBoundingClientRect(), m = s.miniScale;
    lib.draw.centerOn(s, (ev.clientX - r.left) / m.sx + m.x0, (ev.clientY - r.top) / m.sy + m.y0);
    repaint();
  });
}

export function wire(s, lib, repaint) {
  const unwire = wirePanZoom(s, repaint);
  wireHover(s, lib, repaint);
  wireClicks(s, lib);
  wireToolbar(s, lib, repaint);
  wireMinimap(s, lib, repaint);
  wireKeys(s, lib, repaint);
  return unwire;
}
