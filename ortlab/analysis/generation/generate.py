"""``ortlab.generate``: an LLM decoder as people run it — a prefill, then token by token with
the KV cache — timed per step: time to first token, prefill and decode tokens/s, time per
token against the cache's length, and the cache's bytes by formula beside the present
outputs' real sizes. An encoder-decoder's encoder runs first (:mod:`.seq2seq`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ortlab.analysis.generation.phases import phase_roofs
from ortlab.analysis.generation.result import GenerationResult
from ortlab.analysis.generation.seq2seq import (
    EncoderPart,
    encoder_layers,
    encoder_part,
    seq2seq_note,
    start_ids,
    with_ids,
)
from ortlab.analysis.generation.split import shares_said
from ortlab.core.decoder import DecoderInfo
from ortlab.core.decoderinputs import ROLES, role_symbols
from ortlab.core.eps import INSERTED_CAST
from ortlab.core.errors import FeedError, UnsupportedModelError
from ortlab.core.machine import cache_levels, load_sentence
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.result import Table
from ortlab.core.run import Run
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.engine import tasks_generate
from ortlab.engine.calls import as_config, edge, run_model_task

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["GenerationResult", "generate", "generate_run", "require_decoder"]


def require_decoder(
    m: Model, verb: str, instead: str, *, encoder_decoder: bool = False
) -> DecoderInfo:
    """``m``'s decoder, for a verb that runs a decoder token by token; refused with what to use
    ``instead`` when ``m`` is no decoder, and (unless the verb runs ``encoder_decoder`` models
    too) with what measures it today when it is an encoder-decoder (``ortlab.generate``; its
    decoder's steps at any dims; its encoder's file on its own)."""
    info = m.decoder
    if info is None:
        raise FeedError(
            f"{m.name!r} is not a decoder with a KV cache (no past_key_values.* inputs matched "
            f"by present.* outputs): {verb} runs decoders; {instead}"
        )
    if info.first_step:
        raise UnsupportedModelError(
            f"{m.name!r} is {info.line()}. {verb} runs one decoder file token by token (a "
            "merged decoder, or one with-past model whose first step feeds an empty past); "
            f"this folder splits the steps between {info.first_step} and {m.path.name}, "
            "whose cross-attention cache only the first computes. Merge them once with "
            'optimum (pip install optimum-onnx): python -c "from optimum.onnx import '
            f"merge_decoders; merge_decoders('{info.first_step}', '{m.path.name}', "
            "save_path='decoder_model_merged.onnx', strict=False)\" in the folder "
            "(ortlab then loads the merged file), or export without --no-post-process. Each "
            "file alone is measured by ortlab.benchmark / profile / placement."
        )
    if info.seq2seq and not encoder_decoder:
        raise FeedError(
            f"{m.name!r} is an encoder-decoder ({info.line()}): {verb} runs a decoder alone, "
            "token by token; ortlab.generate runs its encoder first and feeds both caches. Its "
            "decoder's steps are measured by ortlab.benchmark / profile / placement at "
            "dims={'prompt': 1, 'past': 16} (a decode step; {'prompt': 4, 'past': 0} is the "
            "first step, its cross-attention cache empty), with the encoder's frames random; "
            f"its encoder by ortlab.benchmark on {info.encoder or 'the encoder file'} beside it."
        )
    return info


def generate(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    dims: Mapping[str, int] | None = None,
    prompt: int | None = None,
    new_tokens: int = 64,
    runs: int = 6,
    batch: int | None = None,
    decoder_prompt: Sequence[int] | np.ndarray | None = None,
    profile: bool = True,
    share_buffer: bool | None = None,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> GenerationResult:
    """``runs`` greedy generations of ``new_tokens`` tokens after a ``prompt``-token prompt, in
    plain onnxruntime in the worker: TTFT, prefill and decode tokens/s with their intervals
    over runs, time per token against the cache's length, the tokens, the KV cache, and (with
    ``profile``) a profiled generation split by phase and layer, with the roofline per
    phase. ``feeds`` may give the prompt's ``input_ids`` ([batch, prompt]); else they are
    random ids in the vocabulary (synthetic, seeded). ``share_buffer`` None does what the
    model's genai_config asks (past_present_share_buffer: one max-length buffer per pair,
    written in place through IOBinding, as onnxruntime-genai does); False passes present to
    past each step.

    An encoder-decoder (optimum's folder: encoder_model.onnx beside the merged decoder):
    ``feeds`` are its encoder's inputs by name (else invented, synthetic), run once per
    generation before the decoder's first step (``by_phase()``'s phase 'encoder'; TTFT
    includes it); the decoder starts from ``decoder_prompt`` (ids) or the folder's
    ``decoder_start_token_id``; its cross-attention cache is the first step's, its
    self-attention cache grows. ``prompt`` is then the start ids' length.

    ``dims`` as every verb takes them, by the decoder's roles (``{"prompt": 128, "batch": 1}``)
    or the model's own names for those dims; ``prompt=`` and ``batch=`` are their shorthand
    (128 and 1 when neither says)."""
    m = load(model)
    info = require_decoder(
        m,
        "ortlab.generate",
        "ortlab.benchmark times a single run of any model.",
        encoder_decoder=True,
    )
    prompt, batch = generation_dims(m, info, dims, prompt=prompt, batch=batch)
    encoder = None
    if info.seq2seq:
        encoder, ids, batch = seq2seq_start(
            m, info, config, feeds, decoder_prompt, new_tokens=new_tokens, runs=runs, batch=batch
        )
        prompt = ids.shape[1]
    else:
        given = _prompt_ids(
            m, info, feeds, decoder_prompt, prompt=prompt, new_tokens=new_tokens, runs=runs
        )
        if given is not None:
            batch, prompt = given.shape
    if info.max_length is not None and prompt + new_tokens > info.max_length:
        what, whose = (
            (f"{prompt} start ids", f"{m.name!r}'s decoder")
            if encoder is not None
            else (f"prompt {prompt}", repr(m.name))
        )
        raise FeedError(
            f"{what} + {new_tokens} new tokens is beyond the {info.max_length} tokens {whose} "
            f"is made for ({info.source}): generate fewer."
        )
    run = edge(
        m,
        config,
        None,
        dims={"prompt": prompt, "past": 0, "batch": batch},
        runs=runs,
        progress=progress,
        timeout=timeout,
    )
    if encoder is not None:
        return _from_start(m, info, run, (encoder, ids), new_tokens=new_tokens, profile=profile)
    if given is not None:
        run = with_ids(run, info, given, synthetic=False)
    if share_buffer and not info.can_share_buffer:
        raise FeedError(
            f"share_buffer=True: {m.name!r} cannot write its cache in place (that needs "
            "GroupQueryAttention and a known max length, as onnxruntime-genai's builder makes)."
        )
    shared = info.shared_buffer(share_buffer)
    return _measure(
        m,
        info,
        run,
        new_tokens=new_tokens,
        profile=profile,
        shared=shared,
        feeds_text=f"input_ids [{batch}, {prompt}]",
    )


def generate_run(run: Run, *, new_tokens: int, profile: bool = True) -> GenerationResult:
    """:func:`generate`'s body for a :class:`Run` resolved already at the first step's dims
    (``prompt``, ``past`` 0, ``batch``), its prompt ids the edge's (synthetic) and its ``runs``
    the generations; the cache as the model asks (``share_buffer=None``). An encoder-decoder's
    encoder runs first on synthetic inputs, its decoder from the folder's start ids."""
    m = run.model
    info = require_decoder(
        m,
        "ortlab.generate",
        "ortlab.benchmark times a single run of any model.",
        encoder_decoder=True,
    )
    batch, prompt = np.shape(run.inputs[info.input_ids])
    if info.seq2seq:
        encoder, ids, _ = seq2seq_start(
            m, info, run.config, None, None, new_tokens=new_tokens, runs=run.runs, batch=batch
        )
        return _from_start(m, info, run, (encoder, ids), new_tokens=new_tokens, profile=profile)
    return _measure(
        m,
        info,
        run,
        new_tokens=new_tokens,
        profile=profile,
        shared=info.shared_buffer(None),
        feeds_text=f"input_ids [{batch}, {prompt}]",
    )


def _from_start(
    m: Model,
    info: DecoderInfo,
    run: Run,
    start: tuple[EncoderPart, np.ndarray],
    *,
    new_tokens: int,
    profile: bool,
) -> GenerationResult:
    """An encoder-decoder's generations: its encoder first, the decoder from ``start``'s ids."""
    encoder, ids = start
    return _measure(
        m,
        info,
        with_ids(run, info, ids, synthetic=encoder.synthetic),
        new_tokens=new_tokens,
        profile=profile,
        shared=0,
        feeds_text=f"{encoder.feeds}; decoder_prompt {ids[0].tolist()}",
        encoder=encoder,
    )


def generation_dims(
    m: Model,
    info: DecoderInfo,
    dims: Mapping[str, int] | None,
    *,
    prompt: int | None,
    batch: int | None,
) -> tuple[int, int]:
    """A generation's prompt length and batch from ``dims`` (by role or the model's own
    symbols for them) and the ``prompt=``/``batch=`` shorthands; one said twice must agree,
    and a generation starts from an empty cache (no past)."""
    said: dict[str, int] = {}
    symbols = role_symbols(m.signature, info)
    for name, value in (dims or {}).items():
        role = name if name in ROLES else symbols.get(name)
        if role == "past":
            raise FeedError(
                f"dims={{{name!r}: {value}}}: a generation starts from an empty cache; the "
                "cache's length as it grows is its own (llm_bench(depth=…) fills it first)."
            )
        if role not in ("prompt", "batch"):
            known = sorted({*ROLES[:2], *(k for k, r in symbols.items() if r in ROLES[:2])})
            raise FeedError(
                f"dims={{{name!r}: …}}: a generation's dims are its prompt and batch "
                f"({', '.join(known)}); the others follow from them."
            )
        said[role] = int(value)
    for role, short in (("prompt", prompt), ("batch", batch)):
        if short is not None and said.setdefault(role, short) != short:
            raise FeedError(f"{role} is given twice, {said[role]} in dims= and {role}={short}.")
    return said.get("prompt", 128), said.get("batch", 1)


def _measure(
    m: Model,
    info: DecoderInfo,
    run: Run,
    *,
    new_tokens: int,
    profile: bool,
    shared: int,
    feeds_text: str,
    encoder: EncoderPart | None = None,
) -> GenerationResult:
    """The generations in the worker (``run``: the decoder's first step's feeds, its prompt
    ids; ``encoder``: an encoder-decoder's encoder, run first in each) and the result with its
    notes, split and rooflines."""
    batch, prompt = np.shape(run.inputs[info.input_ids])
    runs = run.runs
    reply = run_model_task(
        tasks_generate.generate,
        run.with_(unit="token"),  # its bar counts tokens
        decoder=info,
        new_tokens=new_tokens,
        runs=runs,
        profile=profile,
        shared=shared,
        nodes=m.summary.node_count_total
        + (encoder.model.summary.node_count_total if encoder else 0),
        encoder=encoder.job if encoder else None,
    )
    notes = [
        f"Each step is timed whole as a generator runs it (its feeds, sess.run, the argmax "
        "over the logits, the next step's cache: onnxruntime-genai's quantity), profiling "
        f"off, in a session warmed by an untimed {tasks_generate.WARMUP_STEPS}-step "
        f"generation; the prefill is step 0; decode tokens/s are each run's {new_tokens - 1} "
        "decode tokens over their time, the median over runs with an interval from order "
        f"statistics (6 runs or more): {_runs_said(len(reply.steps_ns), runs)}. The model's "
        "own sess.run within the steps: model_ttft_ms, model_decode_tokens_per_s.",
        (
            f"The cache is one buffer of {shared} tokens per past/present pair, bound as both "
            "through IOBinding and written in place (past_present_share_buffer, as "
            "onnxruntime-genai runs this model)."
            if shared
            else "The cache is passed from present to past each step (no buffer sharing"
            + (
                "; this model's genai_config asks for it: share_buffer=None does)."
                if info.share_buffer
                else ")."
            )
        ),
        load_sentence(reply.other_cores),
    ]
    if profile:
        window = reply.profiled_steps
        notes.append(
            f"by_phase()/by_layer(): {reply.profiled_reps} more generations with ORT's "
            "profiler on, "
            + (
                f"their first {window} of {new_tokens} steps (a longer trace would pass the "
                "profiler's cap of 1,000,000 events)"
                if window < new_tokens
                else f"all {new_tokens} steps"
            )
            + f", then {reply.first_steps} more prefills"
            + (" (each after its encoder)" if encoder is not None else "")
            + f"; each node's time is its median over the {reply.profiled_reps + reply.first_steps}"
            " prefills"
            + (" and encoder runs" if encoder is not None else "")
            + " and over the generations' decode steps; "
            + f"times are inflated by the profiler ({PROFILER_OVERHEAD}); "
            + load_sentence(reply.profile.other_cores if reply.profile is not None else None)
            + "."
        )
    if encoder is not None:
        notes.insert(1, seq2seq_note(info, encoder, np.asarray(run.inputs[info.input_ids])))
    elif run.synthetic:
        notes.append(f"The prompt is {prompt} random ids in the vocabulary (synthetic, seeded).")
    result = GenerationResult(
        model=m.name,
        config=run.config,
        prompt=prompt,
        new_tokens=new_tokens,
        batch=batch,
        steps_ms=[[t / 1e6 for t in r] for r in reply.steps_ns],
        model_ms=[[t / 1e6 for t in r] for r in reply.run_ns],
        tokens=reply.tokens,
        kv_bytes_per_token=info.kv_bytes_per_token * batch,
        fixed_cache_bytes=info.fixed_bytes * batch,
        present_bytes=reply.present_bytes,
        rss_growth_bytes=reply.rss_after - reply.rss_before,
        decoder=info.line(),
        layers=info.layers,
        shared_buffer=shared,
        feeds=feeds_text,
        synthetic=encoder.synthetic if encoder else run.synthetic,
        other_cores=reply.other_cores,
        notes=notes,
        profile=reply.profile,
        profiled_steps=reply.profiled_steps,
        profiled_reps=reply.profiled_reps,
        first_steps=reply.first_steps,
        encoder=encoder.job.model_name if encoder else "",
        encoder_ms=[t / 1e6 for t in reply.encoder_ns],
        encoder_model_ms=[t / 1e6 for t in reply.encoder_run_ns],
        encoder_profile=reply.encoder_profile,
        report=reply.report,
    )
    if encoder is not None and reply.encoder_profile is not None:
        result = dataclasses.replace(
            result, encoder_layers=encoder_layers(encoder, reply.encoder_profile.node)
        )
    if reply.profile is None:
        return result
    far = result.outliers()
    if far:
        worst = max(far, key=lambda o: o[3] / max(o[4], 1.0))
        notes.append(
            f"{len(far)} profiled step(s) ran far from their unprofiled time (the worst: "
            f"{worst[0]} step {worst[2]} of profiled generation {worst[1]}, "
            f"{worst[3]:,.0f} µs against {worst[4]:,.0f} µs unprofiled, beyond the "
            "profiler's overhead): left out of by_phase()/by_layer() and the rooflines "
            "(see outliers())."
        )
    found = m.layers
    if found is not None:
        names = reply.profile.node
        result = dataclasses.replace(
            result,
            node_layers={n: found.of(n) for n in names},
            layer_sources={n: found.source_of(n) for n in names},
        )
    notes.append(shares_said(result.timeline))
    split = result.by_phase()
    notes += inserted_casts_said(split)
    roofs, peaks, more = phase_roofs(
        run,
        split,
        prompt=prompt,
        batch=batch,
        profiled_steps=reply.profiled_steps,
    )
    return dataclasses.replace(
        result,
        roofs=roofs,
        peaks=peaks,
        levels=cache_levels(),
        notes=[*notes, *more],
    )


def inserted_casts_said(split: Table) -> list[str]:
    """Where the EP had no kernel at the weights' precision and ORT ran nodes in float
    between Cast nodes it inserted (fp16 on the CPU EP): how many, and their share of each
    phase's time ([] where none ran)."""
    casts = split[split.node.str.startswith(INSERTED_CAST)]
    if casts.empty:
        return []
    shares = casts.groupby("phase").share.sum()
    per_phase = ", ".join(f"{shares[p]:.0%} of the {p}" for p in shares.index)
    return [
        f"ORT inserted {casts.node.nunique()} Cast node(s) to run nodes its EP has no kernel "
        f"for at the weights' precision in float ({per_phase}): those nodes ran, and are set "
        "against the ceilings, as fp32 work."
    ]


def _prompt_ids(
    m: Model,
    info: DecoderInfo,
    feeds: FeedsLike | None,
    decoder_prompt: Sequence[int] | np.ndarray | None,
    *,
    prompt: int,
    new_tokens: int,
    runs: int,
) -> np.ndarray | None:
    """A decoder's prompt ids from ``feeds`` ([batch, prompt]; None when no feeds are given:
    the run makes them, synthetic), ``prompt``, ``new_tokens`` and ``runs`` checked first."""
    if decoder_prompt is not None:
        raise FeedError(
            f"decoder_prompt= is an encoder-decoder's; {m.name!r} is a decoder alone: give its "
            f"prompt as feeds={{{info.input_ids!r}: ids [batch, prompt]}}."
        )
    if new_tokens < 1 or prompt < 1 or runs < 1:
        raise ValueError(
            f"prompt, new_tokens and runs must be >= 1 (got {prompt}, {new_tokens}, {runs})"
        )
    if feeds is None:
        return None
    ids = np.asarray(feeds[info.input_ids]) if info.input_ids in feeds else None
    if ids is None or ids.ndim != 2:
        raise FeedError(
            f"generate's feeds give the prompt: {{{info.input_ids!r}: array [batch, prompt]}}; "
            "the mask, positions and cache are built each step."
        )
    return ids


def seq2seq_start(
    m: Model,
    info: DecoderInfo,
    config: ConfigLike | None,
    feeds: FeedsLike | None,
    decoder_prompt: Sequence[int] | np.ndarray | None,
    *,
    new_tokens: int,
    runs: int,
    batch: int,
) -> tuple[EncoderPart, np.ndarray, int]:
    """Where an encoder-decoder's generations start: its encoder's part (``feeds`` are the
    encoder's), the decoder's start ids (``decoder_prompt`` or the folder's) and the batch
    (the encoder's feeds' when given, else ``batch``)."""
    if new_tokens < 1 or runs < 1:
        raise ValueError(f"new_tokens and runs must be >= 1 (got {new_tokens}, {runs})")
    encoder = encoder_part(m, info, as_config(config), feeds, batch=batch)
    batch = int(np.shape(next(iter(encoder.job.feeds.values())))[0]) if encoder.job.feeds else 1
    encoder = dataclasses.replace(
        encoder,
        start="decoder_prompt"
        if decoder_prompt is not None
        else info.start_source or "the folder's decoder_start_token_id",
    )
    return encoder, start_ids(info, decoder_prompt, batch), batch


def _runs_said(made: int, asked: int) -> str:
    """How many timed generations ran, and why more than asked."""
    if made <= asked:
        return f"{made} runs"
    span = tasks_generate.MIN_TIMED_NS / 1e9
    return (
        f"{made} runs ({asked} asked for; more until the timed runs spanned {span:g} s, so "
        "that a hiccup of a busy machine is a run's, not the sample's)"
    )
