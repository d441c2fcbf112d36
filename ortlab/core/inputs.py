"""Synthesize feeds for a model and validate feeds a user gives.

Every ONNX tensor element type gets data (bfloat16, float8 and 4-bit types through ml_dtypes,
which onnx already depends on). Symbolic dims come from ``dims=``; the rest get stated defaults.
Integer inputs that index an embedding table stay inside it, masks are ones: the synthesized
feeds run the model the way real data would.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from onnx import helper

from ortlab.core.errors import FeedError, OrtlabWarning

if TYPE_CHECKING:
    from ortlab.core.signature import Signature, TensorInfo

__all__ = ["Feeds", "FeedsLike", "example_inputs", "shapes_text", "unfixed_dims"]

FeedsLike: TypeAlias = Mapping[str, Any]
"""Feeds as a caller gives them: input name -> an array, or anything ``numpy.asarray`` takes (a
list, a scalar). The values are Any to the type checker on purpose, said here once: each one's
dtype and shape are checked against the model's input when the feeds are validated (a clear
``FeedError``), which no static type can do."""

_DIM_DEFAULTS: tuple[tuple[str, int, str], ...] = (
    (r"batch|^n$|^b$|^bs$|num_samples", 1, "batch-like"),
    (r"seq|len|token|time|step|^s$|^t$|^l$|past", 128, "sequence-like"),
    (r"height|width|^h$|^w$|img|image|size", 224, "image-size-like"),
    (r"chan|^c$", 3, "channel-like"),
)


@dataclass(frozen=True)
class DimChoice:
    name: str
    value: int
    why: str
    """'given', or the default rule that chose it."""


class Feeds(dict[str, Any]):
    """A ``{input name: array}`` dict that also says how its symbolic dims were chosen."""

    dims: dict[str, DimChoice]
    notes: list[str]
    synthetic: bool
    """True when ortlab made the arrays (random, seeded), False for feeds the caller gave."""

    def __init__(
        self,
        arrays: Mapping[str, np.ndarray],
        dims: dict[str, DimChoice] | None = None,
        notes: list[str] | None = None,
        synthetic: bool = False,
    ) -> None:
        super().__init__(arrays)
        self.dims = dims or {}
        self.notes = notes or []
        self.synthetic = synthetic

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every input's shape, by name."""
        return {k: tuple(np.shape(v)) for k, v in self.items()}

    def shapes_text(self) -> str:
        """``input: float32[1, 3, 48, 320], …``: the shapes a figure was measured at."""
        return shapes_text(self)

    def guessed(self) -> str:
        """'' when no shape was guessed; else a sentence naming the guessed dims and how to
        set them (a run that fails at guessed shapes says so)."""
        dims = [f"{d.name}={d.value}" for d in self.dims.values() if d.why.startswith("guessed")]
        dims += [
            n.split(" (")[0] for n in self.notes if "unnamed dynamic dim" in n and "guessed" in n
        ]
        if not dims:
            return ""
        return (
            f"These shapes were guessed ({'; '.join(dims)}), not given: set the model's "
            "real sizes with dims=… (or feeds=… for unnamed dims)."
        )

    def said_as(self, why: str) -> Feeds:
        """These feeds with each dim that was given said as ``why`` (a stage that chose them:
        'the doctor's step'), the arrays the same."""
        dims = {k: replace(d, why=why) if d.why == "given" else d for k, d in self.dims.items()}
        return Feeds(self, dims, list(self.notes), synthetic=self.synthetic)

    def describe(self) -> str:
        chosen = [f"{d.name}={d.value} ({d.why})" for d in self.dims.values()]
        return shapes_text(self, "; ") + (" | dims " + ", ".join(chosen) if chosen else "")

    def __reduce__(  # keep dims/notes across pickling to the worker
        self,
    ) -> tuple[type[Feeds], tuple[dict[str, np.ndarray], dict[str, DimChoice], list[str], bool]]:
        return (Feeds, (dict(self), self.dims, self.notes, self.synthetic))


def shapes_text(arrays: FeedsLike, sep: str = ", ") -> str:
    """``name: dtype[shape]`` of every array, joined by ``sep``."""
    return sep.join(
        f"{k}: {getattr(v, 'dtype', type(v).__name__)}{list(np.shape(v))}"
        for k, v in arrays.items()
    )


def _default_dim(name: str) -> tuple[int, str]:
    low = name.lower()
    for pattern, value, label in _DIM_DEFAULTS:
        if re.search(pattern, low):
            return value, f"default for {label} dims"
    return 1, "default for unrecognised dims"


def resolve_dims(model: Signature, dims: Mapping[str, int] | None) -> dict[str, DimChoice]:
    """Every symbolic dim's value and why: given, or a stated guess (its name says what it is,
    else its place in the input: a batch axis, an image's height or width, a sequence). A
    ``dims=`` name the model lacks is warned about, naming the model's dims, and ignored."""

    given = dict(dims or {})
    symbols = {d for t in model.inputs if t.shape for d in t.shape if isinstance(d, str)}
    unknown = set(given) - symbols
    if unknown:
        unnamed = [
            f"{t.name} axis {a}"
            for t in model.inputs
            if t.shape
            for a, d in enumerate(t.shape)
            if d is None
        ]
        listed = sorted(symbols) or ("none" if unnamed else "none (all dims are fixed)")
        extra = (
            f"; unnamed dynamic dims ({', '.join(unnamed)}) have no name dims= can use: "
            "pass feeds= with arrays of the shapes you want"
            if unnamed
            else ""
        )
        warnings.warn(
            f"dims= names {sorted(unknown)}, which {model.name!r} does not have: ignored. "
            f"Its symbolic dims: {listed}{extra}.",
            OrtlabWarning,
            stacklevel=3,
        )
    places = positional_guesses(model)
    out: dict[str, DimChoice] = {}
    for sym in sorted(symbols):
        if sym in given:
            value = int(given[sym])
            if value < 0 or value > 1 << 31:
                raise FeedError(f"dims[{sym!r}]={given[sym]} is not a usable size (0..2**31).")
            out[sym] = DimChoice(sym, value, "given")
        else:
            value, why = _default_dim(sym)
            if why == "default for unrecognised dims" and sym in places:
                value, why = places[sym]
            out[sym] = DimChoice(sym, value, why)
    return out


def positional_guesses(model: Signature) -> dict[str | tuple[str, int], tuple[int, str]]:
    """A guess for each dynamic dim from its place (keyed by the dim's name, or by
    ``(input, axis)`` for an unnamed one): axis 0 is a batch (1); an image's height and width
    (4-D float input with 1, 3 or 4 channels first or last) are the other spatial dim when that
    one is fixed, else 224; the second axis of a 2-D or 3-D input is a sequence (128). Every
    guess says so: the user sets dims or feeds to change it."""
    out: dict[str | tuple[str, int], tuple[int, str]] = {}
    for t in model.inputs:
        shape = list(t.shape or ())
        rank = len(shape)
        image = rank == 4 and t.dtype.startswith(("float", "bfloat"))
        chan = next((a for a in (1, 3) if image and shape[a] in (1, 3, 4)), None)
        spatial = [a for a in (1, 2, 3) if a != chan] if chan is not None else []
        for axis, d in enumerate(shape):
            if isinstance(d, int):
                continue
            key: str | tuple[str, int] = d if isinstance(d, str) else (t.name, axis)
            if key in out:
                continue
            if axis == 0:
                out[key] = (1, f"guessed: batch axis of {t.name!r}")
            elif axis in spatial:
                other = next(a for a in spatial if a != axis)
                what = "height" if axis == spatial[0] else "width"
                fixed = shape[other]
                if isinstance(fixed, int) and fixed >= 16:
                    out[key] = (
                        fixed,
                        f"guessed: image {what} of {t.name!r}, as its "
                        f"fixed {'width' if what == 'height' else 'height'}",
                    )
                else:
                    out[key] = (224, f"guessed: image {what} of {t.name!r}, a typical size")
            elif _STATE_NAME.search(t.name):
                out[key] = (1, f"guessed: a batch-like axis of the state {t.name!r}")
            elif rank in (2, 3) and axis == 1:
                out[key] = (128, f"guessed: sequence axis of {t.name!r}")
    return out


def _gather_bound(model: Signature, input_name: str) -> int | None:
    """If an integer input indexes an initializer via Gather, the size of the indexed axis."""
    graph = model.proto.graph
    inits = {t.name: t for t in graph.initializer}
    bounds = []
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == input_name:
            dims = inits[node.input[0]].dims if node.input[0] in inits else []
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            if -len(dims) <= axis < len(dims) and dims[axis] > 0:  # else: a malformed table
                bounds.append(int(dims[axis]))
    return min(bounds) if bounds else None


def _synth_int(
    info: TensorInfo,
    shape: list[int],
    np_dtype: np.dtype[Any],  # integer (np.iinfo takes it) or ml_dtypes' int4/int2
    rng: np.random.Generator,
    model: Signature,
) -> tuple[np.ndarray, str | None]:
    lname = info.name.lower()
    if "mask" in lname:
        return np.ones(shape, dtype=np_dtype), f"{info.name}: mask filled with ones"
    if "token_type" in lname or "segment" in lname:
        return np.zeros(shape, dtype=np_dtype), f"{info.name}: segment ids filled with zeros"
    if "position" in lname and shape:
        pos = np.broadcast_to(np.arange(shape[-1]), shape).astype(np_dtype)
        return pos, f"{info.name}: positions 0..{shape[-1] - 1}"
    bound = _gather_bound(model, info.name)
    high = bound if bound else 10
    if np_dtype.kind in "iu":  # an int8 index into a 1000-row table stays below 128
        high = min(high, int(np.iinfo(np_dtype).max) + 1)
    if info.dtype in ("int4", "int2", "uint4", "uint2"):
        high = min(high, 2)
    note = f"{info.name}: integers in [0, {high})" + (
        " (size of the table it indexes)" if bound else ""
    )
    return rng.integers(0, high, size=shape).astype(np_dtype), note


def _synth(
    info: TensorInfo, shape: list[int], rng: np.random.Generator, model: Signature
) -> tuple[np.ndarray, str | None]:
    np_dtype = np.dtype(helper.tensor_dtype_to_np_dtype(_elem_type(info.dtype)))
    if 0 in shape:  # empty: no values to make (and no arange over a huge other dim)
        return np.zeros(shape, dtype=object if info.dtype == "string" else np_dtype), None
    if info.dtype == "string":
        return np.full(shape, "ortlab", dtype=object), "string input filled with 'ortlab'"
    if info.dtype == "bool":
        return rng.random(shape) < 0.5, None
    if np.issubdtype(np_dtype, np.integer) or info.dtype in ("int4", "uint4", "int2", "uint2"):
        return _synth_int(info, shape, np_dtype, rng, model)
    if np.issubdtype(np_dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype), None
    return rng.standard_normal(shape).astype(np_dtype), None


_STATE_NAME = re.compile(r"state|hidden|cell|cache|memory|past|^h0?$|^c0?$|^h_|^c_", re.I)
NOISE_OF_STD = 0.1
"""Perturbed samples add noise at this fraction of the given array's own standard deviation."""


def like_given(name: str, given: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """A sample like the caller's feed ``given``: its meaning and scale kept.

    Non-float inputs (ids, masks, sample rates, flags), scalars and 1-element inputs (a TTS
    speed, a scale), recurrent state, and constant arrays are copied: another value would
    change what the model computes. Other float arrays are the given values plus noise at
    10 % of their own standard deviation, clipped to their range, so the sample keeps the
    input's range and statistics (an image fed 0..255 is not redrawn from N(0, 1))."""
    if given.dtype.kind not in "fc":
        return given.copy(), f"{name}: copied from the feeds given"
    if given.size <= 1:
        return given.copy(), f"{name}: copied from the feeds given (a scalar)"
    if _STATE_NAME.search(name):
        return given.copy(), f"{name}: copied from the feeds given (state)"
    finite = given[np.isfinite(given)] if given.dtype.kind == "f" else given
    std = float(np.std(finite)) if finite.size else 0.0
    if not std:
        return given.copy(), f"{name}: copied from the feeds given (constant values)"
    lo, hi = float(np.min(finite.real)), float(np.max(finite.real))
    noise = rng.standard_normal(given.shape) * (NOISE_OF_STD * std)
    out = np.clip(given + noise, lo, hi).astype(given.dtype)
    how = f"noise at {NOISE_OF_STD:.0%} of their std ({NOISE_OF_STD * std:.3g})"
    return out, f"{name}: the feeds given + {how}, kept in their range [{lo:.4g}, {hi:.4g}]"


_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


def _float_default(
    name: str, array: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, str] | None:
    """Float inputs with a shape that says what they are, when no feeds were given: a scalar
    or 1-element input (a speed, a scale, a temperature) is 1.0, not a random sign; an
    image-like input (4-D with 1 or 3 channels first or last, both other dims >= 16) stays
    within the range of normalized pixels (ImageNet mean/std), as most exported vision models
    expect.
    None for the rest (standard normal)."""
    if array.size == 1:
        return np.ones_like(array), f"{name}: a scalar, set to 1.0 (pass feeds to set it)"
    shape = array.shape
    if len(shape) == 4 and array.dtype.kind == "f":
        nchw = shape[1] in (1, 3) and min(shape[2], shape[3]) >= 16
        nhwc = shape[3] in (1, 3) and min(shape[1], shape[2]) >= 16
        if nchw or nhwc:
            axis = 1 if nchw else 3
            channels = shape[axis]
            mean = np.asarray(_IMAGENET_MEAN if channels == 3 else [0.5])
            std = np.asarray(_IMAGENET_STD if channels == 3 else [0.5])
            view = [1, 1, 1, 1]
            view[axis] = channels
            low = (0 - mean.reshape(view)) / std.reshape(view)  # pixel 0 and 1, normalized
            high = (1 - mean.reshape(view)) / std.reshape(view)
            out = np.clip(rng.standard_normal(shape), low, high).astype(array.dtype)
            how = "ImageNet mean/std" if channels == 3 else "mean 0.5, std 0.5"
            return out, (
                f"{name}: image-like ({'NCHW' if nchw else 'NHWC'}), standard normal "
                f"kept within the range of pixels normalized with {how} "
                f"({float(low.min()):.2f}..{float(high.max()):.2f}), as exported "
                "vision models mostly expect; pass feeds if the model takes 0..255 "
                "or 0..1"
            )
    return None


def _elem_type(dtype: str) -> int:
    from onnx import TensorProto

    return int(TensorProto.DataType.Value(dtype.upper()))


# Synthesized feeds above this much memory are almost always a mis-set dim, not a wish.
SYNTH_LIMIT_BYTES = 2 << 30


def _synth_limit() -> int:
    """2 GiB, or half the memory available now if that is less (never OOM-kill the caller)."""
    import psutil

    return int(min(SYNTH_LIMIT_BYTES, psutil.virtual_memory().available // 2))


def _work_bytes(np_dtype: np.dtype[np.generic], dtype: str) -> int:
    """Peak bytes per element while synthesizing: the result plus numpy's float64/int64
    temporaries (two complex128 ones for complex types, a pointer for strings)."""
    if dtype == "string":
        return 8
    if np.issubdtype(np_dtype, np.complexfloating):
        return np_dtype.itemsize + 48
    return np_dtype.itemsize + 8


def _np_dtype_of(info: TensorInfo, model: Signature) -> np.dtype[np.generic]:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(_elem_type(info.dtype)))
    except (KeyError, TypeError, ValueError) as err:
        what = "UNDEFINED" if info.dtype == "undefined" else repr(info.dtype)
        raise FeedError(
            f"Input {info.name!r} of {model.name!r} declares element type {what}, which is not "
            "one ortlab can synthesize. Fix the input's type in the model, or pass "
            "feeds for it yourself."
        ) from err


def _input_shape(
    info: TensorInfo,
    model: Signature,
    choices: dict[str, DimChoice],
    given: Mapping[str, tuple[int, ...]] | None = None,
) -> list[int]:
    if given and info.name in given:  # the shape of a template feed (see ``like=``)
        return [int(d) for d in given[info.name]]
    if info.kind != "tensor_type":
        what = "declares no type" if info.kind == "undefined" else f"is a {info.dtype}"
        raise FeedError(
            f"Input {info.name!r} of {model.name!r} {what}, not a tensor; ortlab synthesizes "
            "tensors only. Pass feeds for it yourself."
        )
    if info.shape is None:
        raise FeedError(
            f"Input {info.name!r} of {model.name!r} has no shape (unknown rank), so ortlab "
            "cannot synthesize it. Pass feeds for it yourself."
        )
    shape: list[int] = []
    for axis, d in enumerate(info.shape):
        if isinstance(d, int):
            if d < 0:
                raise FeedError(
                    f"Input {info.name!r} declares a negative dim ({d}) on axis {axis}: the "
                    "model is malformed. Fix its shape or pass feeds yourself."
                )
            shape.append(d)
        elif isinstance(d, str):
            shape.append(choices[d].value)
        else:
            shape.append(positional_guesses(model).get((info.name, axis), (1, ""))[0])
    return shape


def default_shapes(model: Signature) -> dict[str, list[int]]:
    """The shape ortlab would synthesize each tensor input at without dims= or feeds= (named
    dims by their stated guesses, unnamed ones by their place): what a picture of a model that
    never ran is worked out at. Inputs it cannot synthesize are left out."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choices = resolve_dims(model, None)
    out: dict[str, list[int]] = {}
    for info in model.inputs:
        try:
            out[info.name] = _input_shape(info, model, choices)
        except FeedError:
            continue
    return out


def example_inputs(
    model: Signature,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    *,
    like: FeedsLike | None = None,
    choices: Mapping[str, DimChoice] | None = None,
) -> Feeds:
    """Seeded feeds for every graph input; ``dims`` sets symbolic dims by name (``choices``:
    dims already resolved, each with its reason, used as they are); ``like``
    (feeds) fixes every input's shape to that feed's, unnamed dims included, so samples made
    for calibration or accuracy match the shapes the model is timed at. When ``like`` holds the
    caller's own feeds, their non-float inputs (token ids, masks, a sample rate) are copied:
    random values would change what the model computes (a branch, a table lookup)."""
    choices = dict(choices) if choices is not None else resolve_dims(model, dims)
    shapes = {k: np.shape(v) for k, v in like.items()} if like is not None else None
    rng = np.random.default_rng(seed)
    arrays: dict[str, Any] = {}
    notes: list[str] = []
    planned = 0
    limit: int | None = None
    for info in model.inputs:
        shape = _input_shape(info, model, choices, shapes)
        places = positional_guesses(model)
        notes += [
            f"{info.name}: unnamed dynamic dim on axis {axis} set to "
            f"{places.get((info.name, axis), (1, ''))[0]} "
            f"({places.get((info.name, axis), (1, 'nothing to go by'))[1]}; pass feeds= to "
            "set it)"
            for axis, d in enumerate(info.shape or ())
            if d is None and not (shapes and info.name in shapes)
        ]
        np_dtype = _np_dtype_of(info, model)
        count = int(np.prod(shape, dtype=object)) if shape else 1
        if int(np.prod([d for d in shape if d] or [1], dtype=object)) >= 1 << 56:
            raise FeedError(  # numpy refuses such dims even when another dim is 0
                f"Input {info.name!r} of {model.name!r} would have shape {shape}: no array can "
                "have dims this large, even an empty one. Fix the model's dims, pass smaller "
                "dims=, or pass feeds yourself."
            )
        planned += count * _work_bytes(np_dtype, info.dtype)
        limit = limit or _synth_limit()
        if planned > limit:
            symbolic = [d for d in info.shape or () if isinstance(d, str)]
            fix = (
                f"Pass smaller dims=, e.g. dims={{{symbolic[0]!r}: 1}}, or feeds yourself."
                if symbolic
                else "Its dims are fixed in the model: pass feeds yourself."
            )
            raise FeedError(
                f"Input {info.name!r} would have shape {shape} ({count:,} elements of "
                f"{info.dtype}): too large to synthesize (about {planned / 2**30:,.1f} GiB of "
                f"memory for all inputs so far; the limit is {limit / 2**30:.1f} GiB). {fix}"
            )
        array, note = _synth(info, shape, rng, model)
        if like is not None and not getattr(like, "synthetic", False) and info.name in like:
            array, note = like_given(info.name, np.asarray(like[info.name]), rng)
        elif array.dtype.kind == "f" and array.size:
            array, note = _float_default(info.name, array, rng) or (array, note)
        arrays[info.name] = array
        if note:
            notes.append(note)
    return Feeds(arrays, choices, notes, synthetic=True)


def unfixed_dims(
    model: Signature, fixed: Mapping[str, int] | Iterable[tuple[str, int]]
) -> dict[str, list[str]]:
    """Per input, its symbolic dims that ``fixed`` (a config's free-dimension overrides, name
    to value) does not fix: the shapes that change from run to run."""
    pinned = dict(fixed)
    out = {}
    for t in model.inputs:
        names = [d for d in (t.shape or []) if isinstance(d, str) and d not in pinned]
        if names:
            out[t.name] = names
    return out
