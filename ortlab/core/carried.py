"""What a decoder carries from one step to the next, read from its graph: each layer's K/V
pair (past inputs -> the present outputs they become) and its role — a cache that grows, or a
sliding window's fixed buffer, from the attention op that reads it —, and a hybrid decoder's
carried states that are not K/V (a convolution's or a recurrence's, fixed in size).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from ortlab.core.onnx_util import DTYPE_BYTES, dtype_name, walk_nodes

__all__ = [
    "PAST",
    "PRESENT",
    "KVPair",
    "StatePair",
    "carried_states",
    "grows",
    "kv_by_layer",
    "value_dims",
    "value_dtype",
    "windows",
    "with_window",
]


PAST = re.compile(
    r"past(?:[^0-9]*?(\d+)(\D*?)(key|value)|[_.]?(key|value)[_.]?([a-z]*?)[_.]?(\d+)$)",
    re.IGNORECASE,
)
"""A past K/V's name: the layer before key/value ('past_key_values.0.decoder.key') or after
it (onnxruntime-genai's Whisper: 'past_key_self_0', 'past_value_cross_1')."""


PRESENT = re.compile(
    r"present(?:[^0-9]*?(\d+)(\D*?)(key|value)|[_.]?(key|value)[_.]?([a-z]*?)[_.]?(\d+)$)",
    re.IGNORECASE,
)


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


_STATE = re.compile(r"past", re.IGNORECASE)


def carried_states(
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
        a, b = value_dims(v)[1:], value_dims(outputs[present])[1:]
        if a != b or not a or not all(isinstance(d, int) for d in a):
            continue
        layer = re.search(r"(\d+)", name)
        out.append(
            StatePair(
                int(layer.group(1)) if layer else len(out),
                name,
                present,
                tuple(int(d) for d in a if isinstance(d, int)),
                value_dtype(v),
                readers[name],
            )
        )
    return tuple(sorted(out, key=lambda st: st.layer))


def windows(graph: onnx.GraphProto) -> dict[str, tuple[int, bool]]:
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


def with_window(pair: KVPair, window: tuple[int, bool] | None, slack: int) -> KVPair:
    """``pair`` with the window its attention reads and, for a fixed buffer, its slots."""
    if window is None:
        return pair
    size, fixed = window
    return dataclasses.replace(pair, window=size, capacity=size + slack if fixed else 0)


def kv_by_layer(
    values: Mapping[str, onnx.ValueInfoProto], pattern: re.Pattern[str]
) -> dict[tuple[int, str], dict[str, str]]:
    """{(layer, what the name says between the layer and key/value): {'key': …, 'value': …}}:
    'past_key_values.0.decoder.key' and '.0.encoder.key' are two caches of layer 0."""
    out: dict[tuple[int, str], dict[str, str]] = {}
    for name in values:
        m = pattern.search(name)
        if m:
            layer, what, kv = m.group(1, 2, 3) if m.group(1) else m.group(6, 5, 4)
            out.setdefault((int(layer), what.lower()), {})[kv.lower()] = name
    return out


def grows(past: onnx.ValueInfoProto, present: onnx.ValueInfoProto) -> bool | None:
    """Whether the present is longer than the past it comes from (its length dim another
    symbol or size); None where the export declares neither."""
    a, b = value_dims(past), value_dims(present)
    if len(a) != 4 or len(b) != 4 or a[2] is None or b[2] is None:
        return None
    return a[2] != b[2]


def value_dims(v: onnx.ValueInfoProto) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for d in v.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def value_dtype(v: onnx.ValueInfoProto) -> str:
    return dtype_name(v.type.tensor_type.elem_type)
