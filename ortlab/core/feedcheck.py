"""Checking the feeds a caller gives against the model, as onnxruntime does and no stricter:
names, dtypes, ranks and fixed dims refused with what to change (onnxruntime refuses them);
two inputs that give one symbolic dim name two values said in a warning (onnxruntime runs
them)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from onnx import helper

from ortlab.core.errors import FeedError, OrtlabWarning
from ortlab.core.inputs import DimChoice, Feeds
from ortlab.core.onnx_util import dtype_name, np_dtype

if TYPE_CHECKING:
    from ortlab.core.inputs import FeedsLike
    from ortlab.core.model import Model
    from ortlab.core.signature import TensorInfo

__all__ = ["validate_feeds"]


def _np_dtype_name(dtype: np.dtype[np.generic]) -> str:
    """The ONNX name ('float', 'double', 'float8e4m3fn'…) of a numpy dtype."""
    if dtype.kind in "OUS":
        return "string"
    try:
        return dtype_name(helper.np_dtype_to_tensor_dtype(dtype))
    except (KeyError, TypeError, ValueError):
        return str(dtype)


def validate_feeds(model: Model, feeds: FeedsLike) -> Feeds:
    """Check names, dtypes, ranks and fixed dims; returns feeds as arrays (a :class:`Feeds`)."""
    if not isinstance(feeds, Mapping):
        raise FeedError(
            f"feeds must be a dict {{input name: array}}, not {type(feeds).__name__}. "
            f"{model.name!r} takes: {', '.join(t.name for t in model.inputs)}."
        )
    expected = {t.name: t for t in model.inputs}
    missing = [n for n in expected if n not in feeds]
    extra = [n for n in feeds if n not in expected]
    problems: list[str] = []
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"unknown {extra}")
    arrays: dict[str, Any] = {}
    symbols: dict[str, tuple[int, str]] = {}
    disagree: list[str] = []
    for name, value in feeds.items():
        if name not in expected:
            continue
        info = expected[name]
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        arrays[name] = arr
        want = info.dtype
        have = _np_dtype_name(arr.dtype)
        if want != have:
            problems.append(
                f"{name!r}: dtype {have}, expected {want} "
                f"(fix: feeds[{name!r}] = feeds[{name!r}].astype(np.{_np_name(want)}))"
            )
        if info.shape is not None:
            # a decoder's mask is past + new long whatever its export declared (optimum's
            # merged GPT-2 names it with the new tokens' dim): its own dims, not shared
            mask = model.decoder is not None and name == model.decoder.mask
            problems += _shape_problems(name, info, arr.shape, {} if mask else symbols, disagree)
    if disagree and not problems:  # plain onnxruntime runs these: say so, refuse nothing
        warnings.warn(
            "Feeds of "
            + repr(model.name)
            + " disagree on a dim the export names alike: "
            + "; ".join(disagree)
            + ". onnxruntime checks fixed dims only and runs them (a Whisper decoder's empty "
            "cross-attention past shares its dim name with the encoder's frames on purpose); "
            "the results are what the model computes at these shapes.",
            OrtlabWarning,
            stacklevel=3,
        )
    if problems:
        lines = "\n  ".join(problems)
        wanted = ", ".join(f"{t.name}: {t.dtype}{t.shape_text()}" for t in model.inputs)
        raise FeedError(
            f"Feeds do not match {model.name!r}:\n  {lines}\nThe model takes: {wanted}. "
            "model.example_inputs() builds matching feeds."
        )
    dims = {k: DimChoice(k, v, f"from {src!r}") for k, (v, src) in symbols.items()}
    own = feeds if isinstance(feeds, Feeds) and feeds.synthetic else None  # ortlab made them
    if own is not None and own.dims:  # its own record of why each dim has its value
        dims = dict(own.dims)
    return Feeds(
        arrays,
        dims,
        list(feeds.notes) if isinstance(feeds, Feeds) else [],
        synthetic=own is not None,
    )


def _shape_problems(
    name: str,
    info: TensorInfo,
    shape: tuple[int, ...],
    symbols: dict[str, tuple[int, str]],
    disagree: list[str],
) -> list[str]:
    """Rank and fixed-dim mismatches (onnxruntime refuses them); symbolic dims recorded, and
    inputs that give one name two values listed in ``disagree`` (onnxruntime runs them)."""
    assert info.shape is not None
    if len(shape) != len(info.shape):
        return [
            f"{name!r}: rank {len(shape)} {list(shape)}, expected rank {len(info.shape)} "
            f"{info.shape_text()}"
        ]
    problems = []
    for axis, (d, got) in enumerate(zip(info.shape, shape, strict=True)):
        if isinstance(d, int) and d != got:
            problems.append(
                f"{name!r}: dim {axis} is {got}, expected {d} (shape {list(shape)} vs "
                f"{info.shape_text()})"
            )
        elif isinstance(d, str):
            if d in symbols and symbols[d][0] != got:
                disagree.append(
                    f"{name!r} dim {axis} ({d!r}) is {got} where {symbols[d][1]!r} has "
                    f"{symbols[d][0]}"
                )
            symbols.setdefault(d, (got, name))
    return problems


def _np_name(onnx_dtype: str) -> str:
    try:
        return str(np_dtype(onnx_dtype))
    except (ValueError, KeyError, TypeError):
        return onnx_dtype
