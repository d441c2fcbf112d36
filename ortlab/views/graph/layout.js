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
