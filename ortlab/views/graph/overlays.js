// Overlays: what the colours mean. One colour per node or scope group for each mode
// (provider, op_type, time, quant_error, memory, diff, roofline) and the legend under the canvas. No imports: the
// entry (index.js) passes this module to draw.js. Model strings reach the legend through
// textContent / text nodes only.

export const COLOR_MODES = ["provider", "op_type", "time", "quant_error", "memory", "diff", "roofline"];

// The palette comes from Python with the graph (views/colors.py, its one home): `useColors`.
let PALETTE = {};
let CATEGORICAL = ["#999999"];
let VERDICTS = { faster: "#2166AC", slower: "#B2182B", neither: "#BAB0AC" };
const NO_DATA = "#e8e8e8";

// Take the palette the graph carries (the wire form's `colors`); a graph without one (an old
// notebook's saved state) keeps the last palette taken.
export function useColors(colors) {
  if (!colors) return;
  PALETTE = colors.providers || PALETTE;
  CATEGORICAL = colors.categorical?.length ? colors.categorical : CATEGORICAL;
  VERDICTS = colors.verdicts || VERDICTS;
}

function rgb(hex) {  // "#B2182B" -> [178, 24, 43]
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

// The same hash as colors.py hash_color: h * 31 + the first UTF-16 unit of each code point.
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

// The roofline's achieved_fraction on a log scale: at or above the bound pale, a tenth of it
// half way, a hundredth or less the strongest colour (most nodes sit far under their bound).
function roofHeat(fraction) {
  if (fraction === null || fraction === undefined || Number.isNaN(fraction)) return NO_DATA;
  return heat(fraction > 0 ? -Math.log10(Math.min(1, fraction)) / 2 : 1);
}

export function providerColor(provider) {
  return PALETTE[provider] || hashColor(provider);
}

function groupColor(group, mode, stats) {
  const top = Object.entries(group.providers || {}).sort((x, y) => y[1] - x[1])[0];
  if (mode === "time") return heat(stats.maxTime ? group.us_per_run / stats.maxTime : 0);
  if (mode === "roofline") return roofHeat(group.achieved_fraction);
  if (mode === "quant_error") return errorHeat(group.sqnr_db);  // its worst node's
  return top ? providerColor(top[0]) : "#ccc";
}

function errorHeat(sqnr) {  // 0 dB red, 40 dB and above pale
  if (sqnr === null || sqnr === undefined) return NO_DATA;
  return heat(1 - Math.max(0, Math.min(1, sqnr / 40)));
}

// The fill of one visible item (a node or a collapsed scope group) in colour mode `mode`;
// `stats` is data.stats() of the whole graph (the time scale).
export function colorOf(item, mode, stats) {
  if (item.kind === "group") return groupColor(item, mode, stats);
  if (item.kind === "io") return "#f2f2f2";
  if (mode === "op_type") return hashColor(item.op_type);
  if (mode === "time") return heat(stats.maxTime ? Math.sqrt(item.us_per_run / stats.maxTime) : 0);
  if (mode === "diff") {  // diverging: red slower, blue faster, white within noise
    if (item.delta_us === null || item.delta_us === undefined) return NO_DATA;
    if (item.diff_verdict !== "slower" && item.diff_verdict !== "faster") return "#f7f7f7";
    const t = Math.sqrt(Math.min(1, Math.abs(item.delta_us) / (stats.maxDelta || 1)));
    const end = rgb(item.delta_us > 0 ? VERDICTS.slower : VERDICTS.faster);
    return `rgb(${end.map((v) => Math.round(247 + (v - 247) * t)).join(",")})`;
  }
  if (mode === "memory") {
    if (!(item.output_bytes > 0)) return NO_DATA;
    return heat(stats.maxBytes ? Math.sqrt(item.output_bytes / stats.maxBytes) : 0);
  }
  if (mode === "roofline") return roofHeat(item.achieved_fraction);
  if (mode === "quant_error") return errorHeat(item.sqnr_db);
  return item.provider ? providerColor(item.provider) : "#d0d0d0";
}

// Op categories, for the header band of each node (Netron-like: layers, activations, …).
const CATEGORIES = [
  ["layer", "#33658A", /^(Conv|ConvTranspose|ConvInteger|QLinearConv|Gemm|MatMul|MatMulInteger|QLinearMatMul|MatMulNBits|FusedConv|FusedGemm|FusedMatMul|NchwcConv|Attention|MultiHeadAttention|GroupQueryAttention|LSTM|GRU|RNN|DynamicQuantizeLSTM|Einsum)$/],
  ["activation", "#B33F40", /^(Relu|LeakyRelu|PRelu|Sigmoid|HardSigmoid|HardSwish|Tanh|Gelu|FastGelu|BiasGelu|QuickGelu|Softmax|LogSoftmax|Elu|Selu|Mish|Swish|Clip|Softplus)$/],
  ["pool", "#2E7D32", /(Pool|GlobalAveragePool|GlobalMaxPool)$/],
  ["normalization", "#6A4C93", /(Normalization|LayerNorm|BatchNorm)/],
  ["quantization", "#C77D00", /(QuantizeLinear|DequantizeLinear|DynamicQuantizeLinear)$/],
  ["shape", "#8D99AE", /^(Shape|Reshape|Flatten|Squeeze|Unsqueeze|Transpose|Gather|GatherElements|GatherND|Slice|Concat|Split|Expand|Tile|ConstantOfShape|Range|Cast|Identity|Pad|Resize|ReorderInput|ReorderOutput|Size|NonZero|Where|Equal|Less|Greater|Not|And|Or)$/],
  ["control flow", "#222222", /^(If|Loop|Scan)$/],
];

export function categoryColor(op) {
  for (const [, color, re] of CATEGORIES) if (re.test(op || "")) return color;
  return "#999999";  // element-wise math and the rest
}

function legendEntries(d, mode) {
  if (mode === "provider") return d.providers.map((p) => [p, providerColor(p)]);
  if (mode === "op_type") {
    return [...new Set(d.nodes.map((n) => n.op_type))].slice(0, 16).map((o) => [o, hashColor(o)]);
  }
  if (mode === "diff") {
    return [["slower (B − A > 0)", VERDICTS.slower], ["no measurable difference", "#f7f7f7"],
      ["faster", VERDICTS.faster], ["not in both runs", NO_DATA]];
  }
  if (mode === "memory") {
    let max = 0;
    for (const n of d.nodes) max = Math.max(max, n.output_bytes || 0);
    return [["0 MB", heat(0)], [`${(max / 1e6).toFixed(2)} MB of outputs, the largest node (√ scale)`, heat(1)], ["not recorded", NO_DATA]];
  }
  if (mode === "time") {
    let max = 0;
    for (const x of [...d.nodes, ...d.groups]) max = Math.max(max, x.us_per_run || 0);
    return [["0 µs/run", heat(0)], [`${max.toFixed(1)} µs/run, the slowest item (nodes on a √ scale)`, heat(1)]];
  }
  if (mode === "roofline") {
    return [["≥ 100 % of its bound", roofHeat(1)], ["10 %", roofHeat(0.1)],
      ["1 % or less (far under)", roofHeat(0.01)], ["no kernel of its own in the roofline", NO_DATA]];
  }
  return [["0 dB (bad)", heat(1)], ["40 dB (good)", heat(0)], ["no data", NO_DATA]];
}

function span(text) {
  const s = document.createElement("span");
  s.textContent = text;
  return s;
}

const HINTS = {
  quant_error: "no quantization error data: ortlab.graph(m, error=ortlab.quantization_error(m, q))",
  roofline: "no roofline: ortlab.graph(m, roofline=ortlab.roofline(m, c), placement=ortlab.placement(m, c))",
};

function hint(mode) {
  const h = span(HINTS[mode] ||
    "no runtime data yet: ortlab.graph(m, placement=ortlab.placement(m)) adds EPs and time");
  h.className = "ortlab-hint";
  return h;
}

function swatch(label, color) {
  const s = document.createElement("span");
  const sw = document.createElement("span");
  sw.style.cssText = `display:inline-block;width:10px;height:10px;margin-right:3px;background:${color}`;
  s.append(sw, document.createTextNode(label));
  return s;
}

// The legend for colour mode `mode` of graph data `d`, written into the element `legend`.
export function drawLegend(legend, d, mode) {
  legend.replaceChildren();
  const entries = legendEntries(d, mode);
  if (!entries.length || (mode === "time" && !d.has_time) || (mode === "quant_error" && !d.has_quant) ||
      (mode === "roofline" && !d.has_roofline)) {
    legend.appendChild(hint(mode));
    if (!entries.length) return;
  }
  if (mode === "roofline") {
    legend.appendChild(span("share of what this machine allows: measured time vs computed work and measured peaks:"));
  }
  for (const [label, color] of entries) legend.appendChild(swatch(label, color));
  if (d.edges.some((e) => e.boundary)) {
    legend.appendChild(span("red dashed edge: crosses execution providers"));
  }
  if (d.nodes.some((n) => n.predicted)) {
    legend.appendChild(span("hatched: predicted placement (ortlab.whatif), not a run"));
  }
}
