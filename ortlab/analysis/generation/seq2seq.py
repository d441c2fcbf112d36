"""What ``ortlab.generate`` adds for an encoder-decoder (optimum's Whisper, T5, BART…): the
encoder beside the decoder, its feeds (the caller's, by the encoder's own input names, or
invented and said to be), and the ids the decoder starts from (the folder's
``decoder_start_token_id``, or the caller's ``decoder_prompt``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import FeedError
from ortlab.core.inputs import Feeds
from ortlab.core.layers import layer_from_name, layer_map
from ortlab.core.model import Model, load
from ortlab.core.run import ModelJob, Run
from ortlab.engine.calls import edge

if TYPE_CHECKING:
    from ortlab.core.inputs import FeedsLike

__all__ = [
    "EncoderPart",
    "encoder_layers",
    "encoder_part",
    "seq2seq_note",
    "start_ids",
    "with_ids",
]


@dataclass(frozen=True)
class EncoderPart:
    """The encoder as a generation runs it: its model, the job the worker runs (its file, the
    decoder's session config, its feeds) and what the feeds are."""

    model: Model
    job: ModelJob
    feeds: str
    """'input_features [1, 80, 3000] (synthetic: …)' or the given inputs' shapes."""
    synthetic: bool
    layers: int
    """The encoder's layers (its config's ``encoder_layers``, else the decoder's)."""
    start: str = ""
    """Where the decoder's start ids came from ("the folder's decoder_start_token_id",
    'decoder_prompt')."""


def encoder_part(
    m: Model,
    info: DecoderInfo,
    config: SessionConfig,
    feeds: FeedsLike | None,
    *,
    batch: int,
) -> EncoderPart:
    """The encoder beside ``m`` (``info.encoder``) with ``feeds`` (validated against its own
    inputs) or inputs made for it at ``batch`` (synthetic, seeded)."""
    if not info.encoder:
        raise FeedError(
            f"{m.name!r} is the decoder of an encoder-decoder, but no encoder file is beside it "
            f"in {m.path.parent} (optimum writes encoder_model.onnx): put the encoder beside the "
            "decoder, or time the decoder's steps alone with ortlab.benchmark(dims={'prompt': 1, "
            "'past': 16})."
        )
    enc = load(m.path.parent / info.encoder)
    names = [t.name for t in enc.inputs]
    if feeds is not None and set(feeds) - set(names):
        raise FeedError(
            f"generate's feeds for an encoder-decoder are its encoder's inputs "
            f"({', '.join(names)} of {info.encoder}); got {sorted(feeds)}. The decoder's inputs "
            "(its start ids: decoder_prompt=, its caches) are made each step."
        )
    first = enc.inputs[0].shape if enc.inputs else None
    symbol = first[0] if first and isinstance(first[0], str) else None
    dims = {symbol: batch} if symbol and batch != 1 and feeds is None else None
    run = edge(enc, config, feeds, dims=dims)
    given = {k: np.asarray(v) for k, v in run.inputs.items()}
    shapes = ", ".join(f"{k} [{', '.join(map(str, v.shape))}]" for k, v in given.items())
    made = run.inputs.synthetic
    return EncoderPart(
        model=enc,
        job=ModelJob(str(enc.path), enc.name, run.config, given),
        feeds=shapes + (" (synthetic, seeded)" if made else ""),
        synthetic=bool(made),
        layers=info.encoder_layers or info.layers,
    )


def start_ids(
    info: DecoderInfo, decoder_prompt: Sequence[int] | np.ndarray | None, batch: int
) -> np.ndarray:
    """The decoder's first step's ids, [batch, k]: ``decoder_prompt`` (a list of ids, or an
    array [batch, k]) or the folder's start ids (:attr:`DecoderInfo.decoder_start`)."""
    if decoder_prompt is None:
        if not info.decoder_start:
            raise FeedError(
                "This encoder-decoder's folder says no decoder_start_token_id (neither "
                "generation_config.json nor config.json): pass decoder_prompt=[ids…]."
            )
        ids = np.asarray([info.decoder_start], dtype=np.int64)
    else:
        ids = np.asarray(decoder_prompt, dtype=np.int64)
        ids = ids[None, :] if ids.ndim == 1 else ids
    if ids.ndim != 2 or ids.shape[1] < 1:
        raise FeedError(
            f"decoder_prompt: a list of ids or an array [batch, ids]; got shape {ids.shape}."
        )
    if ids.shape[0] == 1 and batch > 1:
        ids = np.repeat(ids, batch, axis=0)
    return ids


def encoder_layers(encoder: EncoderPart, nodes: Sequence[str]) -> dict[str, int | None]:
    """Each profiled encoder node's layer, from the encoder's graph (its module path, the
    weights it reads; it has no cache to anchor the residual stream), as many layers as its
    config says (``encoder_layers``, else the decoder's); where the graph leaves a node
    outside, its name is read as a hint (an export that names ``layers.0`` keeps it)."""
    found = layer_map(encoder.model.proto.graph, [], encoder.layers)
    out = {}
    for n in nodes:
        layer = found.of(n)
        out[n] = layer if layer is not None else layer_from_name(n, encoder.layers)
    return out


def seq2seq_note(info: DecoderInfo, encoder: EncoderPart, ids: np.ndarray) -> str:
    """What an encoder-decoder's generation ran: the encoder once per generation, then the
    decoder from its start ids with both caches."""
    start = np.asarray(ids)[0].tolist()
    return (
        f"An encoder-decoder: {info.encoder} runs once per generation on {encoder.feeds}, "
        "timed whole (encoder_ms) and part of TTFT; the decoder then starts from ids "
        f"{start} ({encoder.start}); "
        "its self-attention cache grows a token a step, its cross-attention cache is the first "
        "step's (computed from the encoder's states), fed back unchanged."
    )


def with_ids(run: Run, info: DecoderInfo, ids: np.ndarray, *, synthetic: bool) -> Run:
    """``run`` whose first decoder step feeds ``ids`` ([batch, k], cast to the input's dtype):
    a given prompt, or an encoder-decoder's start ids; the other inputs stay the edge's."""
    inputs = dict(run.inputs)
    inputs[info.input_ids] = np.asarray(ids).astype(np.asarray(inputs[info.input_ids]).dtype)
    return run.with_(inputs=Feeds(inputs, run.inputs.dims, [], synthetic=synthetic))
