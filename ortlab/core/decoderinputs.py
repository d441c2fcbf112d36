"""Inputs by role for an LLM decoder: a prefill (``prompt=32``: no past) or a decode step
(``prompt=1, past=32``), always valid — ids in the vocabulary, a mask of past + new ones,
positions that continue the past, a cache of the model's own KV heads and head size, and an
optimum merged decoder's ``use_cache_branch`` set to the phase.

The roles come in through ``dims`` like any dim (``{"prompt": 1, "past": 128}``; the model's
own names for them are read as the same roles: ``sequence_length`` is the prompt,
``past_sequence_length`` the past), so the CLI, the Lab's dims box and every verb take them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.core.errors import FeedError, OrtlabWarning

if TYPE_CHECKING:
    from ortlab.core.decoder import DecoderInfo
    from ortlab.core.inputs import DimChoice, Feeds
    from ortlab.core.signature import Signature

__all__ = ["ROLES", "decoder_dims", "decoder_feeds", "role_symbols"]

ROLES = ("batch", "prompt", "past")
"""The dims a decoder's inputs are made from: sequences, new tokens, tokens already cached."""
DEFAULT_PAST = 128
"""The context a guessed decode step runs after."""
DEFAULT_FRAMES = 128
"""An encoder-decoder's encoder frames where its encoder does not declare them."""


def role_symbols(model: Signature, info: DecoderInfo) -> dict[str, str]:
    """The model's own symbolic dims that carry a role: {symbol: role or a derived value's
    name ('total', 'kv_heads', 'head_size')}."""
    by_name = {t.name: t for t in model.inputs}
    out: dict[str, str] = {}

    def mark(name: str | None, axis: int, role: str) -> None:
        shape = by_name[name].shape if name in by_name else None
        if shape and len(shape) > axis and isinstance(shape[axis], str):
            out.setdefault(str(shape[axis]), role)

    mark(info.input_ids, 0, "batch")
    mark(info.input_ids, 1, "prompt")
    # the past's length is a growing cache's dim; a windowed buffer's is its slots
    growing = [p for p in info.pairs if not p.capacity]
    first = (growing or list(info.pairs))[0].past_key
    mark(first, 0, "batch")
    mark(first, 1, "kv_heads")
    if growing:
        mark(first, 2, "past")
    mark(first, 3, "head_size")
    for p in info.windowed:
        mark(p.past_key, 2, "capacity")
    mark(info.mask, 1, "total")  # a mask declared past + new long (genai's)
    if info.cross_pairs:  # an encoder-decoder: the encoder's frames
        mark(info.cross_pairs[0].past_key, 2, "frames")
        mark(info.encoder_states, 1, "frames")
    return out


def decoder_dims(
    model: Signature, info: DecoderInfo, dims: Mapping[str, int] | None = None
) -> dict[str, DimChoice]:
    """batch, prompt and past for ``dims`` (by those names or the model's own symbols for
    them), each with its reason: what a step's inputs are made from (no arrays made)."""
    symbols = role_symbols(model, info)
    given: dict[str, int] = {}
    unknown = []
    for name, value in (dims or {}).items():
        role = name if name in ROLES else symbols.get(name)
        if role in ROLES:
            given[role] = int(value)
        else:
            unknown.append(name)
    if unknown:
        warnings.warn(
            f"dims= names {sorted(unknown)}: {model.name!r} is a decoder, whose inputs are made "
            f"from {', '.join(ROLES)} (prompt=32 is a prefill, prompt=1, past=128 a decode "
            "step); the others follow from them: ignored.",
            OrtlabWarning,
            stacklevel=4,
        )
    return _roles(info, given)


def decoder_feeds(
    model: Signature,
    info: DecoderInfo,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> Feeds:
    """Seeded, valid inputs for one step of ``info``'s decoder (see the module docstring)."""
    from ortlab.core.inputs import DimChoice, Feeds, example_inputs, resolve_dims

    symbols = role_symbols(model, info)
    roles = decoder_dims(model, info, dims)
    batch, prompt, past = (roles[r].value for r in ROLES)
    frames = info.encoder_length or DEFAULT_FRAMES
    derived = {
        "total": past + prompt,
        "kv_heads": info.kv_heads,
        "head_size": info.head_size,
        "frames": frames,
        "capacity": max((p.capacity for p in info.windowed), default=0),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choices = resolve_dims(model, None)
    for sym, role in symbols.items():
        value = roles[role].value if role in roles else derived[role]
        why = roles[role].why if role in roles else f"the decoder's {role.replace('_', ' ')}"
        choices[sym] = DimChoice(sym, value, why)
    base = example_inputs(model, seed=seed, choices=choices)
    rng = np.random.default_rng(seed + 1)
    arrays: dict[str, Any] = dict(base)
    ids_dtype = np.asarray(base[info.input_ids]).dtype if info.input_ids in base else np.int64
    vocab = info.vocab or 1000
    arrays[info.input_ids] = rng.integers(0, vocab, size=(batch, prompt)).astype(ids_dtype)
    if info.mask and info.mask in base:
        arrays[info.mask] = np.ones((batch, past + prompt), dtype=base[info.mask].dtype)
    if info.positions and info.positions in base:
        pos = np.arange(past, past + prompt, dtype=base[info.positions].dtype)
        arrays[info.positions] = np.broadcast_to(pos, (batch, prompt)).copy()
    arrays.update(_carried(info, base, batch, past, rng))
    if info.use_cache_branch and info.use_cache_branch in base:
        arrays[info.use_cache_branch] = np.array([past > 0], dtype=bool)
    for p in info.cross_pairs:  # empty in the first step (its present computes it), then full
        for name in (p.past_key, p.past_value):
            if name in base and past == 0:
                shape0 = list(np.shape(base[name]))
                shape0[2] = 0
                arrays[name] = np.zeros(shape0, dtype=base[name].dtype)
    phase = "a prefill" if past == 0 else "one decode step"
    window = (
        f"; the sliding-window layers' fixed {info.windowed[0].capacity}-slot buffers "
        + ("empty (zeros)" if past == 0 else "random")
        if info.windowed
        else ""
    ) + (
        f"; the {len(info.states)} carried states "
        + ("zeros (before the first step)" if past == 0 else "random")
        if info.states
        else ""
    )
    cross = tuple(n for p in info.cross_pairs for n in (p.past_key, p.past_value)) + tuple(
        read for _, read in info.encoder_feeds
    )
    ours = (*info.past_inputs, *cross, *info.state_inputs, *([info.mask] if info.mask else []))
    notes = [n for n in base.notes if not n.startswith(ours)]
    notes.append(
        f"decoder inputs: {phase} of {prompt} token(s) after {past} cached, batch {batch} "
        f"(random ids below {vocab}, mask of {past + prompt} ones, a random cache of "
        f"{info.kv_heads} KV heads x {info.head_size}): synthetic{window}"
        + (
            f"; the encoder's {frames} frames random (synthetic), its cross-attention cache "
            + ("empty (the first step computes it)" if past == 0 else "random")
            if info.cross_pairs
            else f"; the cross-attention K/V the encoder computes, random over {frames} frames "
            "(synthetic)"
            if info.encoder_feeds
            else ""
        )
    )
    return Feeds(arrays, {**choices, **roles}, notes, synthetic=True)


def _carried(
    info: DecoderInfo,
    base: Mapping[str, np.ndarray],
    batch: int,
    past: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """What a step carries in, where the arrays made at the roles' dims are not it: each K/V
    pair at its slots (an axis the export left unnamed; a windowed buffer's capacity, empty
    before the first step), each carried state zero before the first step, else random."""
    arrays: dict[str, np.ndarray] = {}
    fixed = {n for p in info.windowed for n in (p.past_key, p.past_value)}
    fixed.update(info.state_inputs)
    for name in info.carried_inputs:
        if name not in base:
            continue
        shape = info.past_shape(name, batch, past)
        if name in fixed and past == 0:  # a first step's fixed buffer or state: zero
            arrays[name] = np.zeros(shape, dtype=base[name].dtype)
        elif name in info.state_inputs or base[name].shape != shape:
            arrays[name] = (rng.standard_normal(shape) * 0.5).astype(base[name].dtype)
    return arrays


def _roles(info: DecoderInfo, given: Mapping[str, int]) -> dict[str, DimChoice]:
    """batch, prompt and past with their reasons; a point past the model's max length is
    refused."""
    from ortlab.core.inputs import DimChoice

    longest = info.max_length
    batch = given.get("batch", 1)
    out = {"batch": DimChoice("batch", batch, "given" if "batch" in given else "one sequence")}
    if "prompt" in given or "past" in given:
        prompt = given.get("prompt", 1)
        past = given.get("past", 0)
        why_prompt = "given" if "prompt" in given else "one decode step (past= given)"
        why_past = (
            "given"
            if "past" in given
            else "a prefill: nothing cached (set past= for a decode step)"
        )
    else:
        prompt, why_prompt = (
            1,
            "guessed: one decode step (set prompt= and past=; prompt=32 alone is a prefill)",
        )
        past = DEFAULT_PAST if longest is None else min(DEFAULT_PAST, longest - 1)
        why_past = f"guessed: {past} tokens already cached"
    if prompt < 1:
        raise FeedError(f"prompt={prompt}: a step runs at least one new token (prompt >= 1).")
    if longest is not None and past + prompt > longest:
        raise FeedError(
            f"past={past} + prompt={prompt} is {past + prompt} tokens, beyond the "
            f"{longest} this decoder is made for ({info.source}): use fewer."
        )
    if info.attention == "GroupQueryAttention" and batch > 1 and prompt > 1 and past > 0:
        raise FeedError(  # ORT's own rule (its kernel refuses such a step)
            f"batch={batch}, prompt={prompt}, past={past}: GroupQueryAttention runs several new "
            "tokens after a past only for one sequence (batch=1); use batch=1, or prompt=1."
        )
    out["prompt"] = DimChoice("prompt", prompt, why_prompt)
    out["past"] = DimChoice("past", past, why_past)
    return out
