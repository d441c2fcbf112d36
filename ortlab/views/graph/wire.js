// The wire form: the `data` trait (and a page's state block) holds pack(graph), columns
// of indices into one front-coded string table, about a seventh of the to_dict() JSON (a
// 50,000-node model: 6 MB instead of 48). unpack() restores the to_dict() form once per value;
// the other modules only see the unpacked graph. No DOM, no imports.

export const PACKED_FORMAT = "ortlab.graph.packed/1";

// The front-coded string table (GraphData.packed in Python): each string is the first
// prefix[i] UTF-16 units of the one before, then suffix[i].
function strings(t) {
  const out = new Array(t.suffix.length);
  let prev = "";
  for (let i = 0; i < out.length; i++) {
    prev = prev.slice(0, t.prefix[i]) + t.suffix[i];
    out[i] = prev;
  }
  return out;
}

const NO_ATTRS = Object.freeze({}), NONE = Object.freeze([]);

function pairs(flat, key, value) {
  if (!flat.length) return NO_ATTRS;
  const o = {};
  for (let i = 0; i < flat.length; i += 2) o[key(flat[i])] = value(flat[i + 1]);
  return o;
}

function unpackNodes(c, S, groupIds) {
  const col = (name) => c[name] || null;  // null: every value is the default
  const str = (i) => S[i], strs = (ixs) => (ixs.length ? ixs.map(str) : NONE);
  const domain = col("domain"), provider = col("provider"), status = col("status");
  const reason = col("reason"), verdict = col("diff_verdict"), us = col("us_per_run");
  const share = col("share"), optimized = col("optimized"), partition = col("partition");
  const sqnr = col("sqnr_db"), attrs = col("attrs"), bytes = col("output_bytes");
  const delta = col("delta_us"), predicted = col("predicted");
  const groupUs = col("group_us_per_run"), source = col("time_source");
  const fraction = col("achieved_fraction"), bound = col("roof_bound"), ceiling = col("roof_ceiling");
  const nodes = new Array(c.count);
  for (let i = 0; i < c.count; i++) {
    nodes[i] = {
      id: i, name: S[c.name[i]], op_type: S[c.op_type[i]], domain: domain ? S[domain[i]] : "",
      group: c.group[i] < 0 ? "" : groupIds[c.group[i]], provider: provider ? S[provider[i]] : "",
      us_per_run: us ? us[i] : 0, share: share ? share[i] : 0, status: status ? S[status[i]] : "",
      optimized: optimized ? strs(optimized[i]) : NONE, partition: partition ? partition[i] : -1,
      sqnr_db: sqnr ? sqnr[i] : null, inputs: strs(c.inputs[i]), outputs: strs(c.outputs[i]),
      attrs: attrs ? pairs(attrs[i], str, str) : NO_ATTRS, reason: reason ? S[reason[i]] : "",
      output_bytes: bytes ? bytes[i] : -1, delta_us: delta ? delta[i] : null,
      diff_verdict: verdict ? S[verdict[i]] : "", predicted: predicted ? Boolean(predicted[i]) : false,
      group_us_per_run: groupUs ? groupUs[i] : 0, time_source: source ? S[source[i]] : "",
      achieved_fraction: fraction ? fraction[i] : null, roof_bound: bound ? S[bound[i]] : "",
      roof_ceiling: ceiling ? S[ceiling[i]] : "", body: c.body ? S[c.body[i]] : "",
    };
  }
  return nodes;
}

// The edges as graph_data (Python) makes them, in its order: from each tensor's producer to
// each node reading it (once per read), in the order tensors are first read; a ghost stub when
// more than `fanout` reads; a boundary when both ends have EPs and they differ. Worked out on
// the string indices of the packed columns (no hashing of names). A graph with If/Loop bodies
// (a `body` column) looks a tensor up in the reader's own body first, then the ones around it,
// as ONNX scopes names (scopedEdges).
function deriveEdges(c, nodes, S, fanout) {
  if (c.body) return scopedEdges(c, nodes, S, fanout);
  const producer = new Int32Array(S.length).fill(-1), reads = new Int32Array(S.length);
  for (let i = 0; i < c.count; i++) for (const t of c.outputs[i]) if (t) producer[t] = i;
  const order = [];  // tensors in the order first read
  for (let i = 0; i < c.count; i++) {
    for (const t of c.inputs[i]) {
      if (producer[t] < 0) continue;
      if (reads[t]++ === 0) order.push(t);
    }
  }
  const start = new Int32Array(S.length);  // each tensor's first slot in `dsts`
  let total = 0;
  for (const t of order) { start[t] = total; total += reads[t]; }
  const dsts = new Int32Array(total), fill = new Int32Array(S.length);
  for (let i = 0; i < c.count; i++) {
    for (const t of c.inputs[i]) if (producer[t] >= 0) dsts[start[t] + fill[t]++] = i;
  }
  const edges = new Array(total);
  let k = 0;
  for (const t of order) {
    const src = producer[t], a = nodes[src].provider, ghost = reads[t] > fanout, tensor = S[t];
    for (let j = start[t]; j < start[t] + reads[t]; j++) {
      const b = nodes[dsts[j]].provider;
      edges[k++] = { src, dst: dsts[j], tensor, boundary: Boolean(a && b && a !== b), ghost };
    }
  }
  return edges;
}

// Each tensor's producer by body (an If's then_branch and else_branch often make tensors of
// one name: optimum's merged decoder holds its network twice), as scoped_producers in Python.
function scopedEdges(c, nodes, S, fanout) {
  const body = c.body, n = S.length, made = new Map(), bodyOf = new Map();
  for (let i = 0; i < c.count; i++) {
    bodyOf.set(S[c.name[i]], body[i]);
    for (const t of c.outputs[i]) if (t) made.set(body[i] * n + t, i);
  }
  const find = (i, t) => {
    let b = body[i];
    for (let hops = 0; hops < 64; hops++) {
      const got = made.get(b * n + t);
      if (got !== undefined) return got;
      const scope = S[b];
      if (!scope) return -1;
      b = bodyOf.get(scope.slice(0, scope.lastIndexOf("/"))) ?? 0;
    }
    return -1;
  };
  const reads = new Map();  // producer and tensor -> readers, in the order first read
  for (let i = 0; i < c.count; i++) {
    for (const t of c.inputs[i]) {
      const src = find(i, t);
      if (src < 0) continue;
      const key = src * n + t;
      const got = reads.get(key);
      if (got) got.dsts.push(i); else reads.set(key, { src, t, dsts: [i] });
    }
  }
  const edges = [];
  for (const { src, t, dsts } of reads.values()) {
    const a = nodes[src].provider, ghost = dsts.length > fanout, tensor = S[t];
    for (const d of dsts) {
      const b = nodes[d].provider;
      edges.push({ src, dst: d, tensor, boundary: Boolean(a && b && a !== b), ghost });
    }
  }
  return edges;
}

// The graph from its wire form pack(graph): nodes, edges and groups as objects with
// the fields of GraphData.to_dict(), and tensors as a Map name -> "dtype[shape]" (a plain
// object of 100,000 names is slow to build). A graph already unpacked (an older notebook's
// saved state) only gets its tensors as a Map.
export function unpack(p) {
  if (!p || p.format !== PACKED_FORMAT) return { ...p, tensors: new Map(Object.entries(p?.tensors || {})) };
  const S = strings(p.strings);
  const G = p.groups, groupIds = G.id.map((i) => S[i]);
  const groups = groupIds.map((id, k) => ({
    id, label: S[G.label[k]], parent: S[G.parent[k]], depth: G.depth[k], size: G.size[k],
    providers: pairs(G.providers[k], (i) => S[i], (c) => c), us_per_run: G.us_per_run[k],
    boundaries: G.boundaries[k], share: G.share[k],
    achieved_fraction: G.achieved_fraction ? G.achieved_fraction[k] : null,
    sqnr_db: G.sqnr_db ? G.sqnr_db[k] : null,
  }));
  const nodes = unpackNodes(p.nodes, S, groupIds);
  const { strings: _s, nodes: _n, groups: _g, tensors: T, format: _f, ghost_fanout: fanout, ...meta } = p;
  const graph = { ...meta, nodes, edges: deriveEdges(p.nodes, nodes, S, fanout), groups };
  let tensors = null;  // built on first use (hover, details, zoomed-in labels), not before the first paint
  Object.defineProperty(graph, "tensors", { enumerable: true, get() {
    if (!tensors) {
      tensors = new Map();
      for (let k = 0; k < T.name.length; k++) tensors.set(S[T.name[k]], S[T.type[k]]);
    }
    return tensors;
  } });
  return graph;
}

const unpacked = new WeakMap();  // the synced `data` object -> its unpacked graph

// The graph of a `data` trait value, unpacked once per value.
export function graphOf(data) {
  if (!unpacked.has(data)) unpacked.set(data, unpack(data));
  return unpacked.get(data);
}
