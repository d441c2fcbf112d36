"""What makes a model an LLM decoder with a KV cache, read once: the past -> present pairs,
the heads and head size, the vocabulary, and where each fact came from.

Three sources, best first: onnxruntime-genai's ``genai_config.json`` beside the model (its
builder writes it), a Hugging Face ``config.json`` (optimum's exports keep it), else the graph
alone (the past inputs' shapes, GroupQueryAttention's attributes, the logits' last dim). A model
whose inputs hold no past key/value pairs matched by present outputs is not a decoder (None).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from ortlab.core.onnx_util import DTYPE_BYTES, dtype_name, subgraphs, walk_nodes

__all__ = ["DecoderInfo", "KVPair", "StatePair", "WeightFormat", "decoder_file", "detect_decoder"]

_PAST = re.compile(r"past[^0-9]*?(\d+)(\D*?)(key|value)", re.IGNORECASE)
_PRESENT = re.compile(r"present[^0-9]*?(\d+)(\D*?)(key|value)", re.IGNORECASE)
ENCODER_FILES = ("encoder_model.onnx",)
"""The encoder an optimum seq2seq folder holds beside its decoder."""
MODEL_FILES = ("decoder_model_merged.onnx", "model.onnx", "decoder_with_past_model.onnx")
"""The model files an optimum folder may hold, the one ortlab loads first."""
FIRST_STEP_FILE = "decoder_model.onnx"
"""The first step's decoder of optimum's unmerged pair (``--no-post-process``), beside
``decoder_with_past_model.onnx``."""


@dataclass(frozen=True)
class KVPair:
    """One layer's cache: the past inputs and the present outputs they become."""

    layer: int
    past_key: str
    past_value: str
    present_key: str
    present_value: str
    window: int = 0
    """The attention's local window (tokens it reads back), read from the op that reads this
    cache (GroupQueryAttention's ``local_window_size``); 0: it reads the whole past."""
    capacity: int = 0
    """A fixed buffer's slots: the cache is that long from the first step on and never grows
    (GroupQueryAttention's ``sliding_window_cache``: window + genai_config's ``cache_slack``);
    0: a cache that grows by each step's tokens."""

    @property
    def role(self) -> str:
        """'windowed' (a fixed buffer of ``capacity`` slots), 'window-read' (grows, but the
        attention reads its last ``window`` tokens) or 'grows'."""
        if self.capacity:
            return "windowed"
        return "window-read" if self.window else "grows"

    def slots(self, tokens: int) -> int:
        """The cache's length after ``tokens`` tokens: a fixed buffer's capacity, else the
        tokens."""
        return self.capacity or tokens


@dataclass(frozen=True)
class StatePair:
    """A carried state that is not K/V (a hybrid decoder's convolution or recurrent state): a
    past input whose present output has the same fixed shape, fed back each step."""

    layer: int
    past: str
    present: str
    shape: tuple[int, ...]
    """Its dims after the batch (fixed: they never grow)."""
    dtype: str
    """ORT's dtype name ('float', 'float16')."""
    op: str
    """The op that reads it ('CausalConvWithState', …)."""

    @property
    def kind(self) -> str:
        """'convolution state' where a convolution reads it, else 'recurrent state'."""
        return "convolution state" if "conv" in self.op.lower() else "recurrent state"

    @property
    def nbytes(self) -> int:
        """One sequence's bytes."""
        return int(math.prod(self.shape) * DTYPE_BYTES.get(self.dtype, 4.0))


@dataclass(frozen=True)
class WeightFormat:
    """How a decoder's weights are stored: ``kind`` ('int4', 'int8', 'fp32', 'fp16', 'bf16'),
    the op that holds them quantized ('MatMulNBits', 'MatMul'; '' for float weights), its
    bits, block size and accuracy level where it says them."""

    kind: str
    op: str
    bits: int
    block: int | None = None
    accuracy_level: int | None = None

    @property
    def quantized(self) -> bool:
        """Stored as integers (an int4 or int8 op holds them)."""
        return bool(self.op)

    def label(self) -> str:
        """As a person names it: 'int4 MatMulNBits (block 32, accuracy level 4)', 'int8
        MatMul', 'fp32 weights'."""
        if not self.op:
            return f"{self.kind} weights"
        extra = ", ".join(
            x
            for x in (
                f"block {self.block}" if self.block else "",
                f"accuracy level {self.accuracy_level}" if self.accuracy_level is not None else "",
            )
            if x
        )
        return f"{self.kind} {self.op}" + (f" ({extra})" if extra else "")


@dataclass(frozen=True)
class DecoderInfo:
    """A decoder's shape as inputs are made for it and its cache is counted."""

    layers: int
    heads: int | None
    """Query heads (None: nothing says)."""
    kv_heads: int
    head_size: int
    vocab: int | None
    max_length: int | None
    """The longest sequence (past + new) it is made for, where its config says."""
    pairs: tuple[KVPair, ...]
    input_ids: str
    mask: str | None
    """The attention mask input (past + new tokens long, whatever its declared dim)."""
    positions: str | None
    use_cache_branch: str | None
    """The boolean input of an optimum merged decoder (True: the branch with a past)."""
    kv_dtype: str
    """ORT's dtype name of the cache ('float', 'float16')."""
    weight_format: WeightFormat
    """How the weights are stored (its ``label()``: 'int4 MatMulNBits (block 32, accuracy
    level 4)', 'fp32 weights', …)."""
    source: str
    """Where the numbers came from: 'genai_config.json', 'config.json' or 'graph'."""
    attention: str = ""
    """The attention op that reads the cache ('GroupQueryAttention', …; '' for plain ops)."""
    share_buffer: bool = False
    """genai_config's ``past_present_share_buffer``: the past is allocated at max_length."""
    cross_pairs: tuple[KVPair, ...] = ()
    """An encoder-decoder's cross-attention cache: past -> present pairs whose present does
    not grow (it holds the encoder's frames, computed in the first step, then fed back
    fixed), told from the self-attention ``pairs`` by their dims."""
    encoder: str = ""
    """The encoder's file beside the decoder ('encoder_model.onnx'), '' for a decoder alone."""
    encoder_states: str | None = None
    """The input the encoder's output is fed to ('encoder_hidden_states')."""
    encoder_length: int | None = None
    """The encoder's frames, where its output declares them (Whisper: 1500)."""
    encoder_mask: str | None = None
    """The decoder's input for the encoder's attention mask ([batch, frames]: T5's
    ``encoder_attention_mask``), None where it takes none (Whisper)."""
    encoder_layers: int | None = None
    """An encoder-decoder's encoder layers, where its config says (``encoder_layers``, T5's
    ``num_layers``)."""
    decoder_start: tuple[int, ...] = ()
    """The ids an encoder-decoder's decoder starts from: ``decoder_start_token_id`` then the
    ``forced_decoder_ids`` that follow it, from generation_config.json (else config.json)."""
    experts: tuple[int, int, int, str] | None = None
    """A mixture of experts, read from its ops: (top-k per token, experts, layers that route,
    the op: 'MoE', 'QMoE'); None for a dense decoder."""
    states: tuple[StatePair, ...] = ()
    """Carried states that are not K/V (a hybrid decoder's convolution or recurrent states:
    LFM2's short convolutions), each fed back from its present every step."""
    first_step: str = ""
    """Optimum's unmerged pair (``--no-post-process``): the file beside this with-past decoder
    that runs the first step (``decoder_model.onnx``: it computes the caches this one is fed,
    the cross-attention cache among them); '' otherwise. A generation needs both files in one
    loop, which ortlab does not run: its verbs say so and how to merge them."""

    @property
    def weights(self) -> str:
        """The weights' format as a person names it (``weight_format.label()``)."""
        return self.weight_format.label()

    @property
    def slot_bytes(self) -> int:
        """One token's key and value in one layer: 2 * KV heads * head size * the cache's
        element size."""
        return int(2 * self.kv_heads * self.head_size * DTYPE_BYTES.get(self.kv_dtype, 4.0))

    @property
    def kv_bytes_per_token(self) -> int:
        """Cache bytes one more token adds, by formula: 2 (key and value) * the layers whose
        cache grows * KV heads * head size * the cache's element size (a windowed layer's
        fixed buffer adds none: :attr:`fixed_cache_bytes`)."""
        return self.slot_bytes * sum(1 for p in self.pairs if not p.capacity)

    @property
    def fixed_cache_bytes(self) -> int:
        """The windowed layers' fixed buffers, held from the first step on whatever the length
        (0 without such layers)."""
        return self.slot_bytes * sum(p.capacity for p in self.pairs)

    @property
    def state_bytes(self) -> int:
        """The carried states' bytes for one sequence (0 without states)."""
        return sum(st.nbytes for st in self.states)

    @property
    def fixed_bytes(self) -> int:
        """What a generation carries whatever its length: the windowed layers' buffers and the
        carried states."""
        return self.fixed_cache_bytes + self.state_bytes

    def cache_bytes(self, tokens: int, batch: int = 1) -> int:
        """What a step carries after ``tokens`` tokens (past + new): each growing layer's
        ``tokens`` slots, each windowed layer's fixed buffer, the carried states."""
        return batch * (self.kv_bytes_per_token * tokens + self.fixed_bytes)

    @property
    def windowed(self) -> tuple[KVPair, ...]:
        """The pairs whose cache is a fixed buffer (a sliding window's)."""
        return tuple(p for p in self.pairs if p.capacity)

    @property
    def state_inputs(self) -> tuple[str, ...]:
        return tuple(st.past for st in self.states)

    def capacity_of(self, name: str) -> int:
        """The fixed slots of the cache input or output ``name`` (0: it grows)."""
        for p in self.pairs:
            if name in (p.past_key, p.past_value, p.present_key, p.present_value):
                return p.capacity
        return 0

    def cache_kinds(self) -> str:
        """What each layer's cache is, said once: 'layers 0, 2: sliding window of 8, a fixed
        8-slot buffer; layers 1, 3: global, grows' ('' where every cache grows and reads its
        whole past)."""
        if all(p.role == "grows" for p in self.pairs) and not self.states:
            return ""
        groups: dict[str, list[int]] = {}
        for st in self.states:
            dims = " x ".join(map(str, st.shape))
            groups.setdefault(f"{st.kind} {dims} ({st.op})", []).append(st.layer)
        for p in self.pairs:
            if p.capacity:
                what = f"sliding window of {p.window}, a fixed {p.capacity}-slot buffer"
            elif p.window:
                what = f"sliding window of {p.window}, the cache grows"
            else:
                what = "global, grows"
            groups.setdefault(what, []).append(p.layer)
        return "; ".join(
            f"layer{'s' if len(ls) > 1 else ''} {', '.join(map(str, sorted(ls)))}: {what}"
            for what, ls in sorted(groups.items(), key=lambda g: min(g[1]))
        )

    def branch_of(self, phase: str) -> str | None:
        """The body of the merged decoder's If that runs in ``phase`` ('then_branch': the one
        with a past, in decode; 'else_branch' in the prefill); None without such an If."""
        if not self.use_cache_branch:
            return None
        return "then_branch" if phase == "decode" else "else_branch"

    def line(self) -> str:
        """The one line that says what the model is, wherever it is described: 'decoder with
        KV cache: 2 layers, 4 heads / 2 KV heads x 16, int4 MatMulNBits (block 32 …)'; an
        encoder-decoder's names its encoder and its cross-attention cache."""
        heads = f"{self.heads} heads / " if self.heads else ""
        text = (
            f"decoder with KV cache: {self.layers} layers, {heads}{self.kv_heads} KV heads × "
            f"{self.head_size}, {self.weights}"
        )
        if self.experts is not None:
            k, n, routed, op = self.experts
            text += f"; mixture of experts: {k} of {n} per token in {routed} layers ({op})"
        kinds = self.cache_kinds()
        if kinds:
            text += f"; {kinds}"
        if self.cross_pairs:
            frames = (
                f" of the encoder's {self.encoder_length} frames" if self.encoder_length else ""
            )
            encoder = f" ({self.encoder} beside)" if self.encoder else ""
            text = (
                f"encoder-decoder{encoder}: {text}; a fixed cross-attention cache{frames} in "
                f"{len(self.cross_pairs)} layers"
            )
        if self.first_step:
            encoder = f", {self.encoder} beside" if self.encoder else ""
            text = (
                f"the with-past half of optimum's unmerged pair ({self.first_step} runs the "
                f"first step{encoder}): {text}"
            )
        return text

    @property
    def past_inputs(self) -> tuple[str, ...]:
        return tuple(n for p in self.pairs for n in (p.past_key, p.past_value))

    @property
    def present_outputs(self) -> tuple[str, ...]:
        return tuple(n for p in self.pairs for n in (p.present_key, p.present_value))


def decoder_file(folder: Path) -> Path | None:
    """The model file of an onnxruntime-genai or optimum folder, or None when the folder is
    neither (the caller says what it holds)."""
    genai = folder / "genai_config.json"
    if genai.is_file():
        name = _read_json(genai).get("model", {}).get("decoder", {}).get("filename")
        if isinstance(name, str) and (folder / name).is_file():
            return folder / name
    if (folder / "config.json").is_file():
        for name in MODEL_FILES:
            if (folder / name).is_file():
                return folder / name
    return None


def detect_decoder(proto: onnx.ModelProto, path: Path) -> DecoderInfo | None:
    """The decoder ``proto`` is (its configs read from ``path``'s folder), or None."""
    graph = proto.graph
    inits = {t.name for t in graph.initializer}
    inputs = {v.name: v for v in graph.input if v.name not in inits}
    outputs = {v.name: v for v in graph.output}
    pasts = _by_layer(inputs, _PAST)
    presents = _by_layer(outputs, _PRESENT)
    found = sorted(set(pasts) & set(presents))
    if not found or not all(len(pasts[k]) == 2 and len(presents[k]) == 2 for k in found):
        return None
    every = [
        KVPair(k[0], pasts[k]["key"], pasts[k]["value"], presents[k]["key"], presents[k]["value"])
        for k in found
    ]
    # a cache whose present is as long as its past never grows: the encoder's (cross-attention)
    windows = _windows(graph)
    folder = path.parent
    genai_config = _read_json(folder / "genai_config.json")  # read once
    genai, search = genai_config.get("model", {}), genai_config.get("search", {})
    slack = _int((genai.get("decoder", {}).get("sliding_window") or {}).get("cache_slack")) or 0
    fixed = [
        p
        for p in every
        if _grows(inputs[p.past_key], outputs[p.present_key]) is False and p.past_key not in windows
    ]
    pairs = tuple(_windowed(p, windows.get(p.past_key), slack) for p in every if p not in fixed)
    if not pairs:
        return None
    # the growing cache's dims say the past's length (a windowed buffer's say its slots)
    first = inputs[next((p for p in pairs if not p.capacity), pairs[0]).past_key]
    shape = _dims(first)
    kv_dtype = _dtype(first)
    ids = _named(inputs, ("input_ids",)) or next(
        (n for n, v in inputs.items() if _dtype(v).startswith("int") and not _PAST.search(n)),
        "",
    )
    hf = _read_json(folder / "config.json")
    taken = {n for p in every for n in (p.past_key, p.past_value, p.present_key, p.present_value)}
    carried = _states(graph, inputs, outputs, taken)
    attention, ops = _attention(graph)
    source, heads, kv_heads, head_size, vocab, max_length = _shape_facts(
        genai, search, hf, ops, outputs
    )
    # the graph's fixed dims are the truth a config can only repeat
    kv_heads = shape[1] if len(shape) == 4 and isinstance(shape[1], int) else kv_heads
    head_size = shape[3] if len(shape) == 4 and isinstance(shape[3], int) else head_size
    if head_size is None:
        head_size = _head_size_from_weights(graph, heads)
    if not kv_heads or not head_size:
        return None  # a past whose shape nothing explains: not a cache ortlab can make
    if heads is None:
        heads = _heads_from_projections(graph, pairs[0], int(kv_heads), int(head_size))
    # past inputs no present answers: a with-past decoder's cross cache, which the first
    # step's decoder (optimum's unmerged pair) computes
    fed_only = set(pasts) - set(presents)
    first_step = FIRST_STEP_FILE if fed_only and (path.parent / FIRST_STEP_FILE).is_file() else ""
    encoder, frames = _encoder_beside(path) if fixed or fed_only else ("", None)
    states = _encoder_states(inputs, fixed)
    return DecoderInfo(
        layers=len({p.layer for p in pairs} | {st.layer for st in carried}),
        heads=heads,
        kv_heads=int(kv_heads),
        head_size=int(head_size),
        vocab=vocab or _logits_vocab(outputs),
        max_length=max_length,
        pairs=pairs,
        input_ids=ids,
        mask=_named(inputs, ("attention_mask",)),
        positions=_named(inputs, ("position_ids",)),
        use_cache_branch=_named(inputs, ("use_cache_branch",)),
        kv_dtype=kv_dtype,
        weight_format=_weight_format(graph, kv_dtype),
        source=source,
        attention=attention,
        share_buffer=bool(search.get("past_present_share_buffer", False)),
        cross_pairs=tuple(fixed),
        encoder=encoder,
        encoder_states=states,
        encoder_length=frames,
        encoder_mask=_encoder_mask(inputs, states),
        decoder_start=_decoder_start(folder, hf) if fixed else (),
        encoder_layers=_int(_first(hf, "encoder_layers", "num_layers")) if fixed else None,
        first_step=first_step,
        states=carried,
        experts=_experts(graph),
    )


def _experts(graph: onnx.GraphProto) -> tuple[int, int, int, str] | None:
    """(top-k, experts, routing nodes, op) of the graph's mixture-of-experts ops (MoE, QMoE:
    ``k`` their attribute, the experts their first weight's leading dim), None without."""
    dims = {t.name: list(t.dims) for t in graph.initializer}
    found = [n for n, _ in walk_nodes(graph) if n.op_type in ("MoE", "QMoE")]
    if not found:
        return None
    node = found[0]
    k = next((int(a.i) for a in node.attribute if a.name == "k"), 1)
    weight = dims.get(node.input[2]) if len(node.input) > 2 else None
    return k, int(weight[0]) if weight else 0, len(found), node.op_type


_STATE = re.compile(r"past", re.IGNORECASE)


def _states(
    graph: onnx.GraphProto,
    inputs: Mapping[str, onnx.ValueInfoProto],
    outputs: Mapping[str, onnx.ValueInfoProto],
    taken: set[str],
) -> tuple[StatePair, ...]:
    """Carried states other than the K/V pairs: an input named as a past whose present (the
    name's 'past' said 'present') has the same fixed dims after the batch, read by some node;
    its layer is the number in its name, its kind the op that reads it."""
    readers = {t: n.op_type for n, _ in walk_nodes(graph) for t in n.input}
    out: list[StatePair] = []
    for name, v in inputs.items():
        if name in taken or not _STATE.search(name) or name not in readers:
            continue
        present = _STATE.sub("present", name, count=1)
        if present not in outputs or present in taken:
            continue
        a, b = _dims(v)[1:], _dims(outputs[present])[1:]
        if a != b or not a or not all(isinstance(d, int) for d in a):
            continue
        layer = re.search(r"(\d+)", name)
        out.append(
            StatePair(
                int(layer.group(1)) if layer else len(out),
                name,
                present,
                tuple(int(d) for d in a if isinstance(d, int)),
                _dtype(v),
                readers[name],
            )
        )
    return tuple(sorted(out, key=lambda st: st.layer))


def _windows(graph: onnx.GraphProto) -> dict[str, tuple[int, bool]]:
    """{past key or value input: (the local window of the attention op that reads it, whether
    that op keeps it as a fixed buffer)} for every GroupQueryAttention with a window (its
    ``local_window_size`` > 0; ``sliding_window_cache`` = 1: the buffer is window slots long
    from the first step on, and the op refuses a shorter one)."""
    out: dict[str, tuple[int, bool]] = {}
    for node, _ in walk_nodes(graph):
        if node.op_type != "GroupQueryAttention" or len(node.input) < 5:
            continue
        attrs = {a.name: int(a.i) for a in node.attribute if a.type == onnx.AttributeProto.INT}
        window = attrs.get("local_window_size", -1)
        if window > 0:
            for name in node.input[3:5]:
                if name:
                    out[name] = (window, bool(attrs.get("sliding_window_cache", 0)))
    return out


def _windowed(pair: KVPair, window: tuple[int, bool] | None, slack: int) -> KVPair:
    """``pair`` with the window its attention reads and, for a fixed buffer, its slots."""
    if window is None:
        return pair
    size, fixed = window
    return dataclasses.replace(pair, window=size, capacity=size + slack if fixed else 0)


def _by_layer(
    values: Mapping[str, onnx.ValueInfoProto], pattern: re.Pattern[str]
) -> dict[tuple[int, str], dict[str, str]]:
    """{(layer, what the name says between the layer and key/value): {'key': …, 'value': …}}:
    'past_key_values.0.decoder.key' and '.0.encoder.key' are two caches of layer 0."""
    out: dict[tuple[int, str], dict[str, str]] = {}
    for name in values:
        m = pattern.search(name)
        if m:
            out.setdefault((int(m.group(1)), m.group(2).lower()), {})[m.group(3).lower()] = name
    return out


def _shape_facts(
    genai: Mapping[str, Any],
    search: Mapping[str, Any],
    hf: Mapping[str, Any],
    ops: Mapping[str, int],
    outputs: Mapping[str, onnx.ValueInfoProto],
) -> tuple[str, int | None, int | None, int | None, int | None, int | None]:
    """(source, heads, KV heads, head size, vocabulary, max length) from the best source:
    genai_config.json, config.json, else the graph's attention op and logits."""
    if genai.get("decoder"):
        dec = genai["decoder"]
        source = "genai_config.json"
        heads = _int(dec.get("num_attention_heads"))
        kv_heads = _int(dec.get("num_key_value_heads")) or heads
        head_size = _int(dec.get("head_size"))
        vocab = _int(genai.get("vocab_size"))
        max_length = _int(search.get("max_length")) or _int(genai.get("context_length"))
    elif hf:
        source = "config.json"
        heads = _int(_first(hf, "num_attention_heads", "n_head", "decoder_attention_heads"))
        heads = heads or _int(hf.get("num_heads"))  # T5
        kv_heads = _int(hf.get("num_key_value_heads")) or heads
        hidden = _int(_first(hf, "hidden_size", "n_embd", "d_model"))
        head_size = _int(_first(hf, "head_dim", "d_kv")) or (
            hidden // heads if hidden and heads else None
        )
        vocab = _int(hf.get("vocab_size"))
        max_length = _int(
            _first(hf, "max_position_embeddings", "n_positions", "max_target_positions")
        )
    else:
        source = "graph"
        heads = ops.get("num_heads")
        kv_heads = ops.get("kv_num_heads") or heads
        head_size = None
        vocab = _logits_vocab(outputs)
        max_length = None
    return source, heads, kv_heads, head_size, vocab, max_length


def _grows(past: onnx.ValueInfoProto, present: onnx.ValueInfoProto) -> bool | None:
    """Whether the present is longer than the past it comes from (its length dim another
    symbol or size); None where the export declares neither."""
    a, b = _dims(past), _dims(present)
    if len(a) != 4 or len(b) != 4 or a[2] is None or b[2] is None:
        return None
    return a[2] != b[2]


def _encoder_states(inputs: Mapping[str, onnx.ValueInfoProto], fixed: list[KVPair]) -> str | None:
    """The float input [batch, frames, hidden] whose frames dim is the cross cache's length."""
    if not fixed:
        return None
    length = _dims(inputs[fixed[0].past_key])[2]
    for name, v in inputs.items():
        dims = _dims(v)
        if len(dims) == 3 and dims[1] == length and _dtype(v).startswith("float"):
            return name
    return None


def _encoder_mask(inputs: Mapping[str, onnx.ValueInfoProto], states: str | None) -> str | None:
    """The 2-D integer input as long as the encoder's states ([batch, frames]): the mask the
    decoder's cross-attention reads (T5's ``encoder_attention_mask``)."""
    if states is None:
        return None
    frames = _dims(inputs[states])[1]
    for name, v in inputs.items():
        dims = _dims(v)
        if len(dims) == 2 and dims[1] == frames and _dtype(v).startswith(("int", "bool")):
            return name
    return None


def _decoder_start(folder: Path, hf: Mapping[str, Any]) -> tuple[int, ...]:
    """``decoder_start_token_id`` and the ``forced_decoder_ids`` right after it (positions 1,
    2, … in order), from generation_config.json, else config.json; () where neither says."""
    for config in (_read_json(folder / "generation_config.json"), hf):
        start = config.get("decoder_start_token_id")
        if isinstance(start, int):
            ids = [start]
            forced = config.get("forced_decoder_ids") or []
            for position, token in sorted(f for f in forced if isinstance(f, list | tuple)):
                if position != len(ids) or not isinstance(token, int):
                    break
                ids.append(token)
            return tuple(ids)
    return ()


def _encoder_beside(path: Path) -> tuple[str, int | None]:
    """The encoder file beside a decoder and its output's frames (where declared)."""
    for name in ENCODER_FILES:
        found = path.parent / name
        if found.is_file() and found != path:
            try:
                enc = onnx.load(str(found), load_external_data=False)
            except Exception:  # noqa: BLE001 - an unreadable encoder is known by name only
                return name, None
            dims = _dims(enc.graph.output[0]) if enc.graph.output else []
            frames = dims[1] if len(dims) == 3 and isinstance(dims[1], int) else None
            return name, frames
    return "", None


def _dims(v: onnx.ValueInfoProto) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for d in v.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def _dtype(v: onnx.ValueInfoProto) -> str:
    return dtype_name(v.type.tensor_type.elem_type)


def _first(config: Mapping[str, object], *keys: str) -> object:
    """The first of ``keys`` a config has (its exporters name one thing several ways)."""
    return next((config[k] for k in keys if k in config), None)


def _named(values: Mapping[str, onnx.ValueInfoProto], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in values), None)


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and value > 0 else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _attention(graph: onnx.GraphProto) -> tuple[str, dict[str, int]]:
    """The first fused attention op that reads the cache and its num_heads / kv_num_heads
    ('', {} for a decoder built of plain ops)."""
    for node, _ in walk_nodes(graph):
        if node.op_type in ("GroupQueryAttention", "MultiHeadAttention", "Attention"):
            heads = ("num_heads", "kv_num_heads")
            return node.op_type, {a.name: int(a.i) for a in node.attribute if a.name in heads}
    return "", {}


def _logits_vocab(outputs: Mapping[str, onnx.ValueInfoProto]) -> int | None:
    logits = outputs.get("logits")
    dims = _dims(logits) if logits is not None else []
    return dims[-1] if dims and isinstance(dims[-1], int) else None


def _head_size_from_weights(graph: onnx.GraphProto, heads: int | None) -> int | None:
    """hidden / heads, the hidden size read from the embedding table's second dim."""
    if not heads:
        return None
    for t in graph.initializer:
        if len(t.dims) == 2 and t.dims[0] > t.dims[1] and t.dims[1] % heads == 0:
            return int(t.dims[1]) // heads
    return None


def _heads_from_projections(
    graph: onnx.GraphProto, pair: KVPair, kv_heads: int, head_size: int
) -> int | None:
    """Query heads from the weights, where no config says them: the key projection is the
    first weight multiplication upstream of the first layer's present key; the query
    projection reads the same activation beside it, and its output width over the head size
    is the heads (a fused QKV projection: its width less the key and value heads')."""
    inits = {t.name: t for t in graph.initializer}
    producer = {t: n for n in graph.node for t in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    seen: set[str] = set()
    todo = [pair.present_key]
    key_proj = None
    while todo and key_proj is None:
        node = producer.get(todo.pop(0))
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        if _out_width(node, inits) is not None:
            key_proj = node
        else:
            todo += [t for t in node.input if t in producer]
    if key_proj is None:
        return None
    x = next((t for t in key_proj.input if t not in inits), None)
    widths = [w for n in consumers.get(x or "", []) if (w := _out_width(n, inits)) is not None]
    fused = len(widths) == 1  # one projection makes query, key and value
    heads = widths[0] // head_size - 2 * kv_heads if fused else max(widths) // head_size
    return heads if heads >= kv_heads and heads % kv_heads == 0 else None


def _out_width(node: onnx.NodeProto, inits: Mapping[str, onnx.TensorProto]) -> int | None:
    """The output features of a weight multiplication (None for any other node)."""
    if node.op_type == "MatMulNBits":
        return next((int(a.i) for a in node.attribute if a.name == "N"), None)
    if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
        return None
    w = inits.get(node.input[1])
    if w is None or len(w.dims) != 2:
        return None
    trans_b = any(a.name == "transB" and a.i for a in node.attribute)
    return int(w.dims[0] if trans_b else w.dims[1])


def _weight_format(graph: onnx.GraphProto, kv_dtype: str) -> WeightFormat:
    """How the weights are stored: the first MatMulNBits' bits, block and accuracy level; an
    int8 MatMul op; else the cache's float type (the weights'; no quantized op holds them)."""
    for node, _ in walk_nodes(graph):
        if node.op_type == "MatMulNBits":
            attrs = {a.name: int(a.i) for a in node.attribute}
            bits = attrs.get("bits", 4)
            return WeightFormat(
                f"int{bits}",
                "MatMulNBits",
                bits,
                attrs.get("block_size"),
                attrs.get("accuracy_level"),
            )
    ops = {n.op_type for n, _ in walk_nodes(graph)}
    if ops & {"MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul", "MatMulIntegerToFloat"}:
        return WeightFormat("int8", "MatMul", 8)
    held = _weights_dtype(graph) or kv_dtype
    kind = {"float": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(held, held)
    return WeightFormat(kind, "", 8 * int(DTYPE_BYTES.get(held, 4.0)))


def _weights_dtype(graph: onnx.GraphProto) -> str | None:
    """The float type holding most of the weights' bytes (the initializers', bodies
    included), None without float weights: an fp16 conversion that keeps fp32 inputs and
    outputs (``keep_io_types``, as ortlab.to_fp16 and onnxconverter's converter do) has an
    fp32 cache but fp16 weights."""
    by_type: dict[str, int] = {}
    graphs = [graph, *(g for n, _ in walk_nodes(graph) for g in subgraphs(n))]
    for g in graphs:
        for t in g.initializer:
            name = dtype_name(t.data_type)
            if name in ("float", "float16", "bfloat16"):
                by_type[name] = by_type.get(name, 0) + math.prod(t.dims) * int(DTYPE_BYTES[name])
    return max(by_type, key=lambda k: by_type[k]) if by_type else None
