"""What makes a model an LLM decoder with a KV cache, read once: the past -> present pairs,
the heads and head size, the vocabulary, and where each fact came from.

Three sources, best first: onnxruntime-genai's ``genai_config.json`` beside the model (its
builder writes it), a Hugging Face ``config.json`` (optimum's exports keep it), else the graph
alone (the past inputs' shapes, GroupQueryAttention's attributes, the logits' last dim). A model
whose inputs hold no past key/value pairs matched by present outputs is not a decoder (None).
What it carries from step to step is read in :mod:`ortlab.core.carried`, what its weights say
in :mod:`ortlab.core.decoderweights`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from ortlab.core.carried import (
    PAST,
    PRESENT,
    KVPair,
    StatePair,
    carried_states,
    grows,
    kv_by_layer,
    value_dims,
    value_dtype,
    windows,
    with_window,
)
from ortlab.core.decoderweights import (
    Experts,
    WeightFormat,
    experts,
    head_size_from_weights,
    heads_from_projections,
    weight_format,
)
from ortlab.core.onnx_util import DTYPE_BYTES, walk_nodes

__all__ = ["DecoderInfo", "KVPair", "StatePair", "WeightFormat", "decoder_file", "detect_decoder"]

ENCODER_FILES = ("encoder_model.onnx",)
"""The encoder an optimum seq2seq folder holds beside its decoder."""
MODEL_FILES = ("decoder_model_merged.onnx", "model.onnx", "decoder_with_past_model.onnx")
"""The model files an optimum folder may hold, the one ortlab loads first."""
FIRST_STEP_FILE = "decoder_model.onnx"
"""The first step's decoder of optimum's unmerged pair (``--no-post-process``), beside
``decoder_with_past_model.onnx``."""


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
    start_source: str = ""
    """Where :attr:`decoder_start` came from ('' for the folder's decoder_start_token_id)."""
    encoder_feeds: tuple[tuple[str, str], ...] = ()
    """(encoder output, decoder input) for an encoder that computes each layer's
    cross-attention K/V itself (onnxruntime-genai's Whisper: encoder.onnx's
    ``present_key_cross_0`` is decoder.onnx's ``past_key_cross_0``, as genai_config.json names
    both): bound once per generation, read unchanged by every step."""
    decoder_start: tuple[int, ...] = ()
    """The ids an encoder-decoder's decoder starts from: ``decoder_start_token_id`` then the
    ``forced_decoder_ids`` that follow it, from generation_config.json (else config.json)."""
    experts: Experts | None = None
    """A mixture of experts, read from its ops; None for a dense decoder."""
    states: tuple[StatePair, ...] = ()
    """Carried states that are not K/V (a hybrid decoder's convolution or recurrent states:
    LFM2's short convolutions), each fed back from its present every step."""
    first_step: str = ""
    """Optimum's unmerged pair (``--no-post-process``): the file beside this with-past decoder
    that runs the first step (``decoder_model.onnx``: it computes the caches this one is fed,
    the cross-attention cache among them); '' otherwise. A generation needs both files in one
    loop, which ortlab does not run: its verbs say so and how to merge them."""

    @property
    def seq2seq(self) -> bool:
        """An encoder-decoder: a cross-attention cache its first step computes, or one its
        encoder computes (:attr:`encoder_feeds`)."""
        return bool(self.cross_pairs or self.encoder_feeds)

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

    @property
    def carried_inputs(self) -> tuple[str, ...]:
        """Every input a step is fed from the step before: the self-attention pasts and the
        carried states."""
        return (*self.past_inputs, *self.state_inputs)

    def past_shape(self, name: str, batch: int, past: int) -> tuple[int, ...]:
        """The shape of the carried input ``name`` after ``past`` cached tokens: a K/V past
        [batch, KV heads, its slots (a windowed buffer's capacity, else ``past``), head
        size]; a carried state [batch, its fixed dims]."""
        for st in self.states:
            if name == st.past:
                return (batch, *st.shape)
        for p in self.pairs:
            if name in (p.past_key, p.past_value):
                return (batch, self.kv_heads, p.slots(past), self.head_size)
        raise KeyError(f"{name!r} is no carried input of this decoder")

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
        if self.encoder_feeds:
            frames = (
                f" of the encoder's {self.encoder_length} frames" if self.encoder_length else ""
            )
            layers = len(self.encoder_feeds) // 2
            text = (
                f"encoder-decoder ({self.encoder} beside, computing the cross-attention K/V): "
                f"{text}; a fixed cross-attention cache{frames} in {layers} layers, the "
                "encoder's outputs"
            )
        if self.first_step:
            encoder = f", {self.encoder} beside" if self.encoder else ""
            text = (
                f"the with-past half of optimum's unmerged pair ({self.first_step} runs the "
                f"first step{encoder}): {text}"
            )
        return text

    @property
    def can_share_buffer(self) -> bool:
        """Whether a run can write the cache in place, one max-length buffer per pair
        (onnxruntime-genai's past_present_share_buffer): GroupQueryAttention, which reads
        the tokens past the sequence's length as empty, and a known max length."""
        return self.attention == "GroupQueryAttention" and bool(self.max_length)

    def shared_buffer(self, asked: bool | None = None) -> int:
        """Tokens of the one buffer per pair a run writes in place (0: each present becomes
        the next past, copied). ``asked``: None does what genai_config says, True asks for it
        (where the model can), False declines it. The one rule; generate and llm_bench ask."""
        wanted = self.share_buffer if asked is None else asked
        return (self.max_length or 0) if wanted and self.can_share_buffer else 0

    @property
    def past_inputs(self) -> tuple[str, ...]:
        return tuple(n for p in self.pairs for n in (p.past_key, p.past_value))


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
    pasts = kv_by_layer(inputs, PAST)
    presents = kv_by_layer(outputs, PRESENT)
    found = sorted(set(pasts) & set(presents))
    if not found or not all(len(pasts[k]) == 2 and len(presents[k]) == 2 for k in found):
        return None
    every = [
        KVPair(k[0], pasts[k]["key"], pasts[k]["value"], presents[k]["key"], presents[k]["value"])
        for k in found
    ]
    # a cache whose present is as long as its past never grows: the encoder's (cross-attention)
    window_of = windows(graph)
    folder = path.parent
    genai_config = _read_json(folder / "genai_config.json")  # read once
    genai, search = genai_config.get("model", {}), genai_config.get("search", {})
    slack = _int((genai.get("decoder", {}).get("sliding_window") or {}).get("cache_slack")) or 0
    fixed = [
        p
        for p in every
        if grows(inputs[p.past_key], outputs[p.present_key]) is False
        and p.past_key not in window_of
    ]
    pairs = tuple(with_window(p, window_of.get(p.past_key), slack) for p in every if p not in fixed)
    if not pairs:
        return None
    # the growing cache's dims say the past's length (a windowed buffer's say its slots)
    first = inputs[next((p for p in pairs if not p.capacity), pairs[0]).past_key]
    shape = value_dims(first)
    kv_dtype = value_dtype(first)
    ids = _named(inputs, ("input_ids",)) or next(
        (n for n, v in inputs.items() if value_dtype(v).startswith("int") and not PAST.search(n)),
        "",
    )
    hf = _read_json(folder / "config.json")
    taken = {n for p in every for n in (p.past_key, p.past_value, p.present_key, p.present_value)}
    carried = carried_states(graph, inputs, outputs, taken)
    attention, ops = _attention(graph)
    source, heads, kv_heads, head_size, vocab, max_length = _shape_facts(
        genai, search, hf, ops, outputs
    )
    # the graph's fixed dims are the truth a config can only repeat
    kv_heads = shape[1] if len(shape) == 4 and isinstance(shape[1], int) else kv_heads
    head_size = shape[3] if len(shape) == 4 and isinstance(shape[3], int) else head_size
    if head_size is None:
        head_size = head_size_from_weights(graph, heads)
    if not kv_heads or not head_size:
        return None  # a past whose shape nothing explains: not a cache ortlab can make
    if heads is None:
        heads = heads_from_projections(graph, pairs[0], int(kv_heads), int(head_size))
    # past inputs no present answers: a with-past decoder's cross cache, which the first
    # step's decoder (optimum's unmerged pair) computes
    fed_only = set(pasts) - set(presents)
    from_encoder = _genai_cross(genai, inputs)
    first_step = (
        FIRST_STEP_FILE
        if fed_only and not from_encoder and (path.parent / FIRST_STEP_FILE).is_file()
        else ""
    )
    encoder_file = str(_section(genai, "encoder").get("filename") or "") if from_encoder else ""
    encoder, frames = _encoder_beside(path, encoder_file) if fixed or fed_only else ("", None)
    if from_encoder:
        length = value_dims(inputs[from_encoder[0][1]])
        frames = length[2] if len(length) == 4 and isinstance(length[2], int) else frames
    states = _encoder_states(inputs, fixed)
    start = _genai_start(folder, genai)
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
        weight_format=weight_format(graph, kv_dtype),
        source=source,
        attention=attention,
        share_buffer=bool(search.get("past_present_share_buffer", False)),
        cross_pairs=tuple(fixed),
        encoder=encoder,
        encoder_states=states,
        encoder_length=frames,
        encoder_mask=_encoder_mask(inputs, states),
        decoder_start=(_decoder_start(folder, hf) if fixed else start[0] if from_encoder else ()),
        start_source=start[1] if from_encoder else "",
        encoder_layers=(
            _int(_first(hf, "encoder_layers", "num_layers"))
            if fixed
            else _int(_section(genai, "encoder").get("num_hidden_layers"))
        ),
        encoder_feeds=from_encoder,
        first_step=first_step,
        states=carried,
        experts=experts(graph),
    )


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


def _encoder_states(inputs: Mapping[str, onnx.ValueInfoProto], fixed: list[KVPair]) -> str | None:
    """The float input [batch, frames, hidden] whose frames dim is the cross cache's length."""
    if not fixed:
        return None
    length = value_dims(inputs[fixed[0].past_key])[2]
    for name, v in inputs.items():
        dims = value_dims(v)
        if len(dims) == 3 and dims[1] == length and value_dtype(v).startswith("float"):
            return name
    return None


def _encoder_mask(inputs: Mapping[str, onnx.ValueInfoProto], states: str | None) -> str | None:
    """The 2-D integer input as long as the encoder's states ([batch, frames]): the mask the
    decoder's cross-attention reads (T5's ``encoder_attention_mask``)."""
    if states is None:
        return None
    frames = value_dims(inputs[states])[1]
    for name, v in inputs.items():
        dims = value_dims(v)
        if len(dims) == 2 and dims[1] == frames and value_dtype(v).startswith(("int", "bool")):
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


START_TOKEN = "<|startoftranscript|>"
"""The token a Whisper tokenizer starts a transcript with (genai's processor reads it there)."""


def _genai_start(folder: Path, genai: Mapping[str, object]) -> tuple[tuple[int, ...], str]:
    """An onnxruntime-genai encoder-decoder's start id and where it came from: its tokenizer's
    :data:`START_TOKEN` (as genai's processor starts a Whisper prompt), else genai_config's
    ``bos_token_id``, said as such; () where neither is there."""
    added = _read_json(folder / "tokenizer.json").get("added_tokens")
    for token in added if isinstance(added, list) else []:
        if isinstance(token, dict) and token.get("content") == START_TOKEN:
            return (int(token["id"]),), f"the tokenizer's {START_TOKEN}"
    bos = _int(genai.get("bos_token_id"))
    if bos is not None:
        return (bos,), "genai_config.json's bos_token_id (the folder names no decoder start)"
    return (), ""


def _section(config: Mapping[str, object], key: str) -> Mapping[str, object]:
    """``config[key]`` where it is a JSON object, else empty."""
    value = config.get(key)
    return value if isinstance(value, dict) else {}


def _genai_cross(
    genai: Mapping[str, object], inputs: Mapping[str, onnx.ValueInfoProto]
) -> tuple[tuple[str, str], ...]:
    """(encoder output, decoder input) per cross-attention K/V an onnxruntime-genai encoder
    computes, as genai_config.json names both (``cross_present_key_names`` of its encoder,
    ``cross_past_key_names`` of its decoder: 'present_key_cross_%d'); each decoder input must
    be the model's. Empty for any other folder."""
    enc, dec = _section(genai, "encoder"), _section(genai, "decoder")
    made, read = _section(enc, "outputs"), _section(dec, "inputs")
    layers = _int(dec.get("num_hidden_layers")) or 0
    out: list[tuple[str, str]] = []
    for i in range(layers):
        for kv in ("key", "value"):
            src, dst = made.get(f"cross_present_{kv}_names"), read.get(f"cross_past_{kv}_names")
            named = isinstance(src, str) and isinstance(dst, str) and "%d" in src and "%d" in dst
            if named and str(dst).replace("%d", str(i)) in inputs:
                out.append((str(src).replace("%d", str(i)), str(dst).replace("%d", str(i))))
    return tuple(out)


def _encoder_beside(path: Path, named: str = "") -> tuple[str, int | None]:
    """The encoder file beside a decoder (``named`` by the folder's config, else optimum's)
    and its output's frames (where declared)."""
    for name in (named, *ENCODER_FILES) if named else ENCODER_FILES:
        found = path.parent / name
        if found.is_file() and found != path:
            try:
                enc = onnx.load(str(found), load_external_data=False)
            except Exception:  # noqa: BLE001 - an unreadable encoder is known by name only
                return name, None
            dims = value_dims(enc.graph.output[0]) if enc.graph.output else []
            frames = dims[1] if len(dims) == 3 and isinstance(dims[1], int) else None
            return name, frames
    return "", None


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
    dims = value_dims(logits) if logits is not None else []
    return dims[-1] if dims and isinstance(dims[-1], int) else None
