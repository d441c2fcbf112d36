"""Which transformer layer each node of an LLM decoder belongs to, read from the graph's
structure, not from node names (a ``torch.onnx.export(dynamo=True)`` model names its nodes
``node_MatMul_41``).

Anchors, most structural first (each node's ``source`` says which decided it):

- ``cache``: the node reads layer *i*'s past key/value, writes its present, or lies on a path
  from the one to the other (the Concat, the fused attention that uses the layer's cache);
- ``metadata``: the module path the exporter wrote into the node (dynamo's
  ``pkg.torch.onnx.name_scopes`` and ``namespace``: ``model.layers.3.mlp``);
- ``weights``: the initializers it reads, directly or through constant-only nodes (a
  DequantizeLinear, a Transpose of a weight), belong to one layer
  (``model.layers.3.mlp.down_proj.weight``); a weight of no layer (``model.embed_tokens.weight``,
  ``lm_head.weight``) marks the node outside the layers.

Every other node lies between anchored ones: after the anchors it depends on and before the
anchors that depend on it. Where both sides are one layer it is that layer (``graph``). Where it
sits between two (the end of one layer's MLP, the next layer's norm): what several layers read
(a rotary table) is from before them; else its name decides when it names a layer in that
range (``name``: a hint only where the structure leaves the choice); else it goes to the later
layer when everything it feeds does (a norm feeding the next layer's projections), otherwise to
the earlier one (``graph``). Before the first layer (the embedding,
the rotary tables every layer reads) and after the last (the final norm, the head) a node is
outside the layers: layer None.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import onnx

from ortlab.core.onnx_util import bodies, ort_node_name

__all__ = ["LayerMap", "layer_from_name", "layer_from_path", "layer_map"]

LAYER_NAME = re.compile(
    r"(?:^|[^a-z0-9])(?:layers?|blocks?|h)[._/](\d+)(?=[^0-9]|$)", re.IGNORECASE
)
"""A layer index in a module path or a node name: 'model.layers.3', '/transformer/h.3/',
'blocks_3'."""
_CALL = re.compile(r"\w+\([^)]*\)")
_PATH_PARTS = re.compile(r"[./:\s'\",\[\]]+")
_SCOPE_KEYS = ("pkg.torch.onnx.name_scopes", "namespace")
_SIZES = frozenset({"Shape", "Size"})
_PARAM = re.compile(r"(weight|bias)", re.IGNORECASE)

SOURCES = ("cache", "metadata", "weights", "residual", "graph", "name")
_MATMULS = frozenset(
    {"MatMul", "Gemm", "MatMulNBits", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "Conv"}
)
_MAX_STREAM_NODES = 20_000
_PASS = frozenset({"Cast", "Identity"})
_RESIDUAL_OPS = frozenset({"Add", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"})


@dataclass(frozen=True)
class LayerMap:
    """Each node's layer (absent or None: outside the layers) and how it was found."""

    layers: int
    layer: dict[str, int | None] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)

    def of(self, node: str) -> int | None:
        """The layer of a node of the original graph or of ORT's optimized one: ORT names a
        node it fuses after the node it started from (``<node>/SimplifiedLayerNormFusion/``),
        so the longest known name the fused one begins with decides; a name ORT made up
        (``Gather_token_1``) is read for a layer index last."""
        found = self._known(node)
        if found is not None:
            return self.layer.get(found)
        return layer_from_name(node, self.layers)

    def source_of(self, node: str) -> str:
        """How :meth:`of` found the layer ('cache', 'metadata', 'weights', 'graph', 'name';
        'fused: <source>' for a node ORT made by fusion; '' when nothing said)."""
        found = self._known(node)
        if found is None:
            return "name" if layer_from_name(node, self.layers) is not None else ""
        src = self.source.get(found, "")
        return src if found == node else f"fused: {src}"

    def counts(self) -> dict[str, int]:
        """Original nodes per source."""
        out = dict.fromkeys(SOURCES, 0)
        for s in self.source.values():
            out[s] = out.get(s, 0) + 1
        return out

    def _known(self, node: str) -> str | None:
        if node in self.layer:
            return node
        head = node
        while "/" in head:
            head = head.rsplit("/", 1)[0]
            if head in self.layer:
                return head
        return None


def layer_from_path(path: str, layers: int = 0) -> int | None:
    """The layer a module path says: its first all-digit part, the index into the ModuleList
    of layers ('model.layers.3.mlp.weight', 'transformer.h.3', dynamo's
    'model.layers.slice(None, 2, None).3' — a slice of the list is dropped first; 'decoder.block.3
    .layer.1': the block). None when no part is a number, or it is at or past ``layers``."""
    for part in _PATH_PARTS.split(_CALL.sub("", path)):
        if part.isdigit():
            k = int(part)
            return None if layers and k >= layers else k
    return None


def layer_from_name(name: str, layers: int = 0) -> int | None:
    """The layer a name says ('/model/layers.3/attn/…', '/transformer/h.3/…'), None when it
    says none or one at or past ``layers`` (genai names its final norm ``layers.<n>``)."""
    m = LAYER_NAME.search(name)
    k = int(m.group(1)) if m else None
    return None if k is None or (layers and k >= layers) else k


@dataclass
class _Scope:
    """One graph (the main one or a control-flow body) as its nodes' dataflow."""

    names: list[str]
    nodes: list[onnx.NodeProto]
    outputs: dict[str, str]
    """The scope's output names as the main graph knows them (a body's k-th output is its
    If's k-th output)."""
    preds: list[list[int]] = field(default_factory=list)
    succs: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        producer = {t: i for i, node in enumerate(self.nodes) for t in node.output if t}
        self.preds = [sorted({producer[t] for t in n.input if t in producer}) for n in self.nodes]
        self.succs = [[] for _ in self.nodes]
        for i, ps in enumerate(self.preds):
            for p in ps:
                self.succs[p].append(i)


@dataclass(frozen=True)
class _Names:
    """What the decoder's inputs and initializers say, shared by every scope."""

    layers: int
    past: dict[str, int]
    present: dict[str, int]
    init: dict[str, onnx.TensorProto]
    named_weights: bool
    """The initializers' names carry layer indices (else none marks a node outside)."""


def layer_map(
    graph: onnx.GraphProto,
    pairs: Sequence[tuple[int, str, str, str, str]],
    layers: int | None = None,
) -> LayerMap:
    """Each node's layer in a decoder whose KV ``pairs`` are (layer, past key, past value,
    present key, present value); an encoder has no cache (no pairs) and its ``layers`` from
    its config: its nodes' layers come from the other sources."""
    layers = len(pairs) if layers is None else layers
    init = {t.name: t for t in _initializers(graph)}
    names = _Names(
        layers=layers,
        past={name: p[0] for p in pairs for name in (p[1], p[2])},
        present={name: p[0] for p in pairs for name in (p[3], p[4])},
        init=init,
        named_weights=any(layer_from_path(n, layers) is not None for n in init),
    )
    out = LayerMap(layers)
    for scope in _scopes(graph):
        value, source = _resolve(scope, names)
        for i, name in enumerate(scope.names):
            if out.layer.get(name) is None:
                v = value[i]
                out.layer[name] = v if 0 <= v < layers else None
                out.source[name] = source[i]
    return out


def _initializers(graph: onnx.GraphProto) -> Iterable[onnx.TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for _, body in bodies(node):
            yield from _initializers(body)


def _scopes(graph: onnx.GraphProto, outputs: Mapping[str, str] | None = None) -> list[_Scope]:
    names = [ort_node_name(n, i) for i, n in enumerate(graph.node)]
    aliases = dict(outputs) if outputs is not None else {v.name: v.name for v in graph.output}
    found = [_Scope(names, list(graph.node), aliases)]
    for node in graph.node:
        for tag, body in bodies(node):
            alias = {}
            if tag in ("then_branch", "else_branch"):  # an If's outputs are its body's
                alias = {b.name: o for b, o in zip(body.output, node.output, strict=False)}
            found += _scopes(body, alias)
    return found


def _cache_layers(scope: _Scope, names: _Names) -> list[int]:
    """Per node, a bit per layer whose past it descends from and whose present it feeds."""
    nodes = scope.nodes
    down = [0] * len(nodes)
    for i, node in enumerate(nodes):
        bits = 0
        if node.op_type not in _SIZES:  # a shape carries the past's length, not its data
            for t in node.input:
                if t in names.past:
                    bits |= 1 << names.past[t]
            for p in scope.preds[i]:
                bits |= down[p]
        down[i] = bits
    up = [0] * len(nodes)
    for i in reversed(range(len(nodes))):
        bits = 0
        for t in nodes[i].output:
            alias = scope.outputs.get(t, t)
            if alias in names.present:
                bits |= 1 << names.present[alias]
        for s in scope.succs[i]:
            bits |= up[s]
        up[i] = bits
    return [d & u for d, u in zip(down, up, strict=True)]


def _anchors(scope: _Scope, names: _Names) -> dict[int, tuple[int, str]]:
    """The nodes whose layer something says: node -> (layer, source); -1 before the layers,
    ``layers`` after them."""
    layers = names.layers
    weights = _weight_roots(scope.nodes, names.init)
    anchor: dict[int, tuple[int, str]] = {}
    outside: list[tuple[int, str]] = []
    for i, cache in enumerate(_cache_layers(scope, names)):
        if cache:
            if cache & (cache - 1) == 0:  # one layer's cache
                anchor[i] = (cache.bit_length() - 1, "cache")
            continue  # a node spanning several layers' caches (a merged decoder's If): none
        scope_text = _scope_text(scope.nodes[i])
        if scope_text is not None:
            k = layer_from_path(scope_text, layers)
            if k is not None:
                anchor[i] = (k, "metadata")
            elif scope_text.strip(" '\"[],"):
                outside.append((i, "metadata"))
            continue
        ks = {layer_from_path(w, layers) for w in weights[i]}
        if len(ks) == 1 and None not in ks:
            anchor[i] = (ks.pop() or 0, "weights")
        elif names.named_weights and any(
            _PARAM.search(w) and _numel(names.init[w]) >= 16 for w in weights[i]
        ):
            outside.append((i, "weights"))
    # an outside anchor is before the layers when a layer's anchor depends on it
    feeds_layer = [False] * len(scope.nodes)
    for i in reversed(range(len(scope.nodes))):
        feeds_layer[i] = any(
            (s in anchor and 0 <= anchor[s][0] < layers) or feeds_layer[s] for s in scope.succs[i]
        )
    for i, how in outside:
        anchor[i] = (-1 if feeds_layer[i] else layers, how)
    return anchor


def _resolve(scope: _Scope, names: _Names) -> tuple[list[int], list[str]]:
    """Every node's layer value (-1 before, ``layers`` after) and its source."""
    n, layers, preds, succs = len(scope.nodes), names.layers, scope.preds, scope.succs
    anchor = _anchors(scope, names)
    low = [-1] * n  # the latest anchor a node depends on
    for i in range(n):
        low[i] = anchor[i][0] if i in anchor else max((low[p] for p in preds[i]), default=-1)
    high = [layers] * n  # the earliest anchor that depends on it
    for i in reversed(range(n)):
        high[i] = anchor[i][0] if i in anchor else min((high[s] for s in succs[i]), default=layers)
    stream = _residual_layers(scope, anchor, layers)
    sizes = [False] * n  # computes a tensor's length, not data: goes where it is used
    for i, node in enumerate(scope.nodes):
        sizes[i] = node.op_type in _SIZES or (bool(preds[i]) and all(sizes[p] for p in preds[i]))
    value, source = [0] * n, [""] * n
    for i in reversed(range(n)):  # consumers first: the "everything it feeds" rule
        lo, hi = low[i], high[i]
        fed = {value[s] for s in succs[i]}
        if any(t in scope.outputs for t in scope.nodes[i].output):
            fed.add(layers)
        hint = layer_from_name(scope.names[i], layers)
        if i in anchor:
            value[i], source[i] = anchor[i]
        elif lo >= hi:
            value[i], source[i] = lo, "graph"
        elif stream is not None and not sizes[i] and lo <= stream[i] <= hi:
            value[i], source[i] = stream[i], "residual"
        elif len(fed) < 2 and hint is not None and lo <= hint <= hi:
            value[i], source[i] = hint, "name"
        else:  # what several layers share is from before them
            value[i], source[i] = (hi if fed == {hi} else lo), "graph"
    return value, source


def _residual_layers(
    scope: _Scope, anchor: Mapping[int, tuple[int, str]], layers: int
) -> list[int] | None:
    """Each node's layer counted along the residual stream, or None where the graph shows no
    consistent one. A residual join adds a tensor to one computed from it through a weight
    multiplication (a sublayer: attention, MLP); a norm's ``x * rsqrt(mean(x^2))`` has none in
    between. The stream is the longest chain of joins, each carrying the one before around a
    sublayer. Layer *i*'s cache anchors sit after R_i joins; a node after c joins is in the
    last layer whose R_i <= c, after the layers once c passes the last layer's R by one
    layer's joins, and before them when it precedes the stream (the embedding, the rotary
    tables, the mask: no join behind them, not fed by the stream's first tensor)."""
    if len(scope.nodes) > _MAX_STREAM_NODES:  # ancestor sets are n^2 bits
        return None
    anc, desc = _closures(scope)
    chain, first = _stream(scope, anc, desc)
    if not chain:
        return None
    residual = sum(1 << i for i in chain)
    count = [(a & residual).bit_count() for a in anc]
    r = []
    for k in range(layers):
        at = [count[i] for i, (v, how) in anchor.items() if v == k and how == "cache"]
        if not at:
            return None
        r.append(min(at))
    steps = {b - a for a, b in itertools.pairwise(r)}
    if any(step <= 0 for step in steps) or len(steps) > 1:
        return None
    per_layer = steps.pop() if steps else None
    out = []
    for i, c in enumerate(count):
        k = max((j for j in range(layers) if r[j] <= c), default=-1)
        if c == r[0] and not (desc[first] >> i & 1):
            k = -1
        elif per_layer is not None and c >= r[-1] + per_layer:
            k = layers
        out.append(k)
    return out


def _stream(scope: _Scope, anc: Sequence[int], desc: Sequence[int]) -> tuple[list[int], int]:
    """The residual joins along the stream, in order, and the producer of the stream's first
    tensor (the embedding)."""
    nodes, preds = scope.nodes, scope.preds
    mm = sum(1 << i for i, nd in enumerate(nodes) if nd.op_type in _MATMULS)
    skip_of: dict[int, int] = {}  # a join -> the producer of the tensor it carries around
    for i, node in enumerate(nodes):
        if node.op_type not in _RESIDUAL_OPS:
            continue
        for x, y in itertools.permutations(preds[i], 2):
            if anc[y] >> x & 1 and (anc[y] | 1 << y) & mm & desc[x]:
                while nodes[x].op_type in _PASS and len(preds[x]) == 1:
                    x = preds[x][0]  # noqa: PLW2901 - the norm's Cast the skip reuses
                skip_of[i] = x
    after = {x: i for i, x in skip_of.items()}
    chain: list[int] = []  # a mask added to scores that depend on it is a join of no chain
    for start in (i for i, x in skip_of.items() if x not in skip_of):
        walk = [start]
        while walk[-1] in after:
            walk.append(after[walk[-1]])
        chain = max(chain, walk, key=len)
    return chain, (skip_of[chain[0]] if chain else -1)


def _closures(scope: _Scope) -> tuple[list[int], list[int]]:
    """Each node's ancestors and descendants as bit sets, along data (a Shape's output
    carries a length, not the tensor)."""
    n = len(scope.nodes)
    sizes = [node.op_type in _SIZES for node in scope.nodes]
    anc = [0] * n
    for i in range(n):
        for p in () if sizes[i] else scope.preds[i]:
            anc[i] |= anc[p] | (1 << p)
    desc = [0] * n
    for i in reversed(range(n)):
        for s in scope.succs[i]:
            if not sizes[s]:
                desc[i] |= desc[s] | (1 << s)
    return anc, desc


def _scope_text(node: onnx.NodeProto) -> str | None:
    for key in _SCOPE_KEYS:
        for prop in node.metadata_props:
            if prop.key == key:
                return prop.value
    return None


def _weight_roots(nodes: Sequence[onnx.NodeProto], init: Mapping[str, object]) -> list[set[str]]:
    """Per node, the initializers it reads directly or through nodes of constants only (those
    nodes themselves read none: they are the weight's preparation). An initializer two nodes
    read is nobody's own: a tied embedding, or a tensor an exporter deduplicated
    (optimum's merge names the final norm's weight after layer 0's when their values match)."""
    const_roots: dict[str, set[str]] = {}
    out: list[set[str]] = []
    for node in nodes:
        mine: set[str] = set()
        all_const = True
        for t in node.input:
            if not t:
                continue
            if t in const_roots:
                mine |= const_roots[t]
            elif t in init:
                mine.add(t)
            else:
                all_const = False
        if all_const and node.op_type != "Shape":
            for t in node.output:
                const_roots[t] = mine
            mine = set()
        out.append(mine)
    readers: dict[str, int] = {}
    for mine in out:
        for w in mine:
            readers[w] = readers.get(w, 0) + 1
    return [{w for w in mine if readers[w] == 1} for mine in out]


def _numel(t: onnx.TensorProto) -> int:
    k = 1
    for d in t.dims:
        k *= int(d)
    return k
