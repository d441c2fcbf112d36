// The data model: which items are visible (nodes, and scope groups shown collapsed), the edges
// between them, the time scale, search, scope expansion and the hover text. Pure functions of
// the unpacked graph (wire.js) and the `expanded` trait; no DOM, no imports.

// The outermost collapsed scope that holds `groupId`, or null when every scope above is open.
function collapsedOwner(groups, open, groupId) {
  const chain = [];
  for (let g = groupId; g; g = groups.get(g)?.parent) chain.unshift(g);
  for (const g of chain) if (!open.has(g)) return g;
  return null;
}

function visibleNodes(data, expanded) {
  const open = new Set(expanded);
  const groups = new Map(data.groups.map((g) => [g.id, g]));
  const items = new Map();
  const itemOf = new Map();
  const owners = new Map();  // group -> the item key of its outermost collapsed scope, or null
  const ownerOf = (group) => {
    if (owners.has(group)) return owners.get(group);
    const g = collapsedOwner(groups, open, group), key = g && "g:" + g;
    if (g && !items.has(key)) items.set(key, { kind: "group", key, ...groups.get(g) });
    owners.set(group, key);
    return key;
  };
  for (const n of data.nodes) {
    const key = n.group ? ownerOf(n.group) : null;
    if (key) {
      itemOf.set(n.id, key);
    } else {
      items.set("n:" + n.id, { kind: "node", key: "n:" + n.id, ...n });
      itemOf.set(n.id, "n:" + n.id);
    }
  }
  return { items, itemOf };
}

// The graph's inputs and outputs as items of their own ("i:<name>", "o:<name>"), as Netron
// draws them, with edges to the items that read or write them (broadcast inputs excepted).
function ioItems(data, items, itemOf, edges) {
  const { readers, writers } = ioEnds(data);
  for (const [t, id] of writers) {
    items.set("o:" + t, { kind: "io", key: "o:" + t, name: t, op_type: "output" });
    edges.set(itemOf.get(id) + ">o:" + t, { v: itemOf.get(id), w: "o:" + t, tensor: t, boundary: false });
  }
  for (const t of data.inputs || []) {
    items.set("i:" + t, { kind: "io", key: "i:" + t, name: t, op_type: "input" });
    const ids = readers.get(t) || [];
    if (ids.length > 8) continue;  // a broadcast input: no edge to each reader (GHOST_FANOUT)
    for (const id of ids) edges.set("i:" + t + ">" + itemOf.get(id), { v: "i:" + t, w: itemOf.get(id), tensor: t, boundary: false });
  }
}

// The nodes reading each graph input and writing each graph output (once per graph).
function ioEnds(data) {
  if (data._io) return data._io;
  const inputs = new Set(data.inputs || []), outputs = new Set(data.outputs || []);
  const readers = new Map(), writers = [];
  for (const n of data.nodes) {
    for (const t of n.inputs) if (inputs.has(t)) (readers.get(t) || readers.set(t, []).get(t)).push(n.id);
    for (const t of n.outputs) if (outputs.has(t)) writers.push([t, n.id]);
  }
  Object.defineProperty(data, "_io", { value: { readers, writers } });
  return data._io;
}

function visibleEdges(data, itemOf) {
  const edges = new Map();
  for (const e of data.edges) {
    const a = itemOf.get(e.src), b = itemOf.get(e.dst);
    if (a === b || e.ghost) continue;
    const k = a + ">" + b;
    const prev = edges.get(k);
    edges.set(k, { v: a, w: b, tensor: e.tensor, boundary: e.boundary || (prev && prev.boundary) });
  }
  return edges;
}

// What is drawn: items keyed "n:<id>" / "g:<group>", edges between items (ghost edges and
// edges inside one collapsed group dropped), and each node id's item key.
export function visibleItems(data, expanded) {
  const { items, itemOf } = visibleNodes(data, expanded);
  const edges = visibleEdges(data, itemOf);
  ioItems(data, items, itemOf, edges);
  return { items, edges: [...edges.values()], itemOf };
}

export function stats(d) {
  if (d._stats) return d._stats;
  let maxTime = 0, maxBytes = 0, maxDelta = 0;
  for (const n of d.nodes) {
    maxTime = Math.max(maxTime, n.us_per_run || 0);
    maxBytes = Math.max(maxBytes, n.output_bytes || 0);
    maxDelta = Math.max(maxDelta, Math.abs(n.delta_us || 0));
  }
  for (const g of d.groups) maxTime = Math.max(maxTime, g.us_per_run || 0);
  Object.defineProperty(d, "_stats", { value: { maxTime, maxBytes, maxDelta } });  // once per graph
  return d._stats;
}

// Names of the nodes whose name or op type contains the query (case-insensitive).
export function searchHits(d, query) {
  const q = query.trim().toLowerCase();
  return new Set(q ? d.nodes
    .filter((n) => n.name.toLowerCase().includes(q) || n.op_type.toLowerCase().includes(q))
    .map((n) => n.name) : []);
}

// `expanded` plus every scope above `group` ("/a/b" opens "/a/b" and "/a").
export function openScopes(expanded, group) {
  const open = new Set(expanded);
  for (let g = group; g; g = g.slice(0, g.lastIndexOf("/"))) open.add(g);
  return [...open];
}

// `expanded` without `group` and the scopes inside it.
export function closeScope(expanded, group) {
  return expanded.filter((g) => g !== group && !g.startsWith(group + "/"));
}

function describeGroup(it) {
  const eps = Object.entries(it.providers || {}).map(([p, c]) => `${p}: ${c}`).join(", ");
  const time = it.us_per_run ? `${it.us_per_run.toFixed(1)} µs/run (${(100 * it.share).toFixed(1)}%) · ` +
    "median run, profiling on" : "no time measured";
  return `${it.id}\n${it.size} nodes · ${eps}\n${time}\nclick to open`;
}

// "of its bound: 42 % (compute-bound, 114 GFLOP/s)": the roofline's achieved_fraction of the
// kernel the node ran in (a time-weighted mean when it ran in several; graphroof.py).
function roofRow(it, row) {
  const pct = 100 * it.achieved_fraction;
  const value = `${pct >= 10 ? pct.toFixed(0) : pct >= 1 ? pct.toFixed(1) : pct.toPrecision(1)} %`;
  const why = [it.roof_bound ? `${it.roof_bound}-bound` : "", it.roof_ceiling].filter((x) => x).join(", ");
  const mean = it.roof_ceiling ? "" : " · time-weighted over its kernels";
  return row("of its bound", `${value}${why ? ` (${why})` : ""}${mean}`);
}

// A node's details as sections of rows, for the details panel (interact.js draws them as
// tables) and the tooltip (describe: one line per row). A row is [key, value, line]: the
// panel shows key | value, the tooltip the line. `tensors` is the unpacked graph's Map
// name -> type (shapes at the run's inputs when the graph came with a placement).
export function details(it, tensors) {
  const row = (key, value, line) => [key, String(value), line ?? `${key}: ${value}`];
  const head = [row("name", it.name, it.name), row("op", `${it.domain ? it.domain + "." : ""}${it.op_type}`,
    `${it.domain ? it.domain + "." : ""}${it.op_type}`)];
  const where = [];
  if (it.provider) where.push(row(it.predicted ? "EP (predicted)" : "EP", it.provider, `EP: ${it.provider}`));
  if (it.reason) where.push(row("why here", it.reason));
  if (it.predicted) where.push(row("note", "predicted placement: not run here", "(predicted placement: not run here)"));
  // a kernel that computes several original nodes: the kernel's own time (as the Profile tab
  // lists it) beside what this node is credited with, and how
  const kernel = it.optimized.length ? it.optimized.join(", ") : "";
  const shared = kernel && it.group_us_per_run > it.us_per_run * 1.0005;
  const time = [];
  if (it.us_per_run) {
    const how = it.time_source && it.time_source !== "measured" ? ` · ${it.time_source}` : "";
    const value = `${it.us_per_run.toFixed(1)} µs/run (${(100 * it.share).toFixed(1)}%) · median run, profiling on${how}`;
    time.push(row("time", value));
    if (shared) time.push(row(`all of ${kernel}`, `${it.group_us_per_run.toFixed(1)} µs/run`,
      `  its part of ${kernel}: ${it.group_us_per_run.toFixed(1)} µs/run in all`));
  } else if (shared) {
    const value = `none of its own (${it.time_source}); ${kernel}: ${it.group_us_per_run.toFixed(1)} µs/run · median run, profiling on`;
    time.push(row("time", value));
  }
  if (it.output_bytes > 0) time.push(row("outputs", `${(it.output_bytes / 1e6).toFixed(3)} MB`));
  if (it.delta_us !== null && it.delta_us !== undefined) {
    time.push(row("run B − A", `${it.delta_us >= 0 ? "+" : ""}${it.delta_us.toFixed(1)} µs/run (${it.diff_verdict})`));
  }
  if (it.sqnr_db !== null && it.sqnr_db !== undefined) time.push(row("SQNR", `${it.sqnr_db.toFixed(1)} dB`));
  if (it.achieved_fraction !== null && it.achieved_fraction !== undefined) time.push(roofRow(it, row));
  const became = it.status ? [row("status", `${it.status}${kernel ? " → " + kernel : ""}`)] : [];
  const io = (dir, names) => names.filter((t) => t).map((t) => row(t, tensors.get(t) || "?",
    `${dir} ${t}: ${tensors.get(t) || "?"}`));
  const attrs = Object.entries(it.attrs || {}).map(([k, v]) => row(k, v, `${k} = ${v}`));
  return [
    { title: "", rows: head }, { title: "placement", rows: where }, { title: "time", rows: time },
    { title: "optimization", rows: became }, { title: "inputs", rows: io("in ", it.inputs) },
    { title: "outputs", rows: io("out", it.outputs) }, { title: "attributes", rows: attrs },
  ].filter((sec) => sec.rows.length);
}

// The tooltip text of an item (plain text: the caller puts it in with textContent).
export function describe(it, tensors) {
  if (it.kind === "group") return describeGroup(it);
  if (it.kind === "io") return `graph ${it.op_type}: ${it.name}\n${tensors.get(it.name) || "?"}`;
  return details(it, tensors).flatMap((sec) => sec.rows.map((r) => r[2])).join("\n");
}
