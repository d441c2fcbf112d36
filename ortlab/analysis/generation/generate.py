"""``ortlab.generate``: an LLM decoder as people run it — a prefill, then token by token with
the KV cache — timed per step: time to first token, prefill and decode tokens/s, time per
token against the cache's length, and the cache's bytes by formula beside the present
outputs' real sizes."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortlab.analysis.generation import split
from ortlab.analysis.generation.phases import (
    PhaseRoof,
    ceiling_lookup,
    dram_fraction,
    phase_roofs,
    roofline_of,
    weights_summary,
)
from ortlab.analysis.limits.ceilings import Peak
from ortlab.analysis.limits.roofline import RooflineResult
from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import FeedError
from ortlab.core.inputs import Feeds
from ortlab.core.layers import layer_from_name
from ortlab.core.machine import last_level_cache_bytes, load_sentence
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.result import Result, table
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.core.stats import median_with_interval
from ortlab.engine import tasks_generate
from ortlab.engine.calls import edge, run_model_task
from ortlab.engine.trace import ProfileData

__all__ = ["GenerationResult", "generate"]


@dataclass(frozen=True)
class GenerationResult(Result):
    """Greedy generations of one decoder, each step timed (profiling off). Times in ms.

    ``plot()``: time per token against the cache's length (the prefill marked).
    """

    model: str
    config: SessionConfig
    prompt: int
    """Prompt tokens (the prefill's length)."""
    new_tokens: int
    """Tokens generated per run: the prefill gives the first, each decode step one more."""
    batch: int
    steps_ms: list[list[float]]
    """Per run, per step: the whole step as a generator runs it — its feeds (ids, mask,
    positions), the model's run, the argmax over the logits and the next step's cache —
    onnxruntime-genai's quantity (step 0 is the prefill)."""
    tokens: list[int]
    """The greedy tokens of the first sequence (the same every run)."""
    kv_bytes_per_token: int
    """By formula: 2 x layers x KV heads x head size x element size (x batch)."""
    present_bytes: list[int]
    """The present outputs' bytes after each step of the first run (measured)."""
    rss_growth_bytes: int
    """The worker's resident memory after the first generation minus before it."""
    decoder: str
    """The decoder's one line (``Model.summary.decoder``)."""
    model_ms: list[list[float]] = field(default_factory=list)
    """Per run, per step: the model's own ``sess.run`` within the step (empty in a result
    saved before it was measured)."""
    shared_buffer: int = 0
    """Tokens of the one buffer per past/present pair every step wrote into (genai's
    past_present_share_buffer); 0: the present outputs became the next past (copies)."""
    layers: int = 0
    """Transformer layers (``DecoderInfo.layers``)."""
    node_layers: dict[str, int | None] = field(default_factory=dict)
    """Each profiled node's layer (None: outside the layers), read from the graph's structure
    (:attr:`ortlab.Model.layers`); empty in a result saved before it existed, whose nodes' names
    are read instead."""
    layer_sources: dict[str, str] = field(default_factory=dict)
    """How each profiled node's layer was found: 'cache' (it uses that layer's KV cache),
    'metadata' (the exporter's module path), 'weights' (the initializers it reads),
    'residual' (its place along the residual stream), 'graph' (between anchored nodes),
    'name' (a hint where the structure leaves the choice); 'fused: …' for a node ORT made."""
    feeds: str = ""
    synthetic: bool | None = None
    other_cores: float | None = None
    notes: list[str] = field(default_factory=list)
    profile: ProfileData | None = None
    """More generations with ORT's profiler on (times inflated by it; shares hold): run k of
    the trace is step k % profiled_steps (0: the prefill) of generation k // profiled_steps."""
    profiled_steps: int = 0
    """Steps each profiled generation covers (all, unless the trace would pass ORT's cap)."""
    profiled_reps: int = 1
    """Profiled generations: a phase's split is each node's median over them and over the
    phase's steps, profiled steps far from their unprofiled time left out (:meth:`outliers`)."""
    roofs: list[PhaseRoof] = field(default_factory=list)
    """The roofline per phase (:mod:`ortlab.analysis.generation.phases`): prefill, decode."""
    peaks: list[Peak] = field(default_factory=list)
    """The ceilings the phases are set against (measured with ORT under the same settings)."""
    cache_bytes: int = 0
    """The last-level cache's size (a call whose bytes fit it is set against the in-cache
    bandwidth)."""

    @property
    def runs(self) -> int:
        return len(self.steps_ms)

    @property
    def ttft_ms(self) -> tuple[float, float, float]:
        """Time to first token (the prefill's run): ``(median over runs, low, high)``, the
        interval from order statistics (NaN with fewer than 6 runs)."""
        return _interval([r[0] for r in self.steps_ms])

    @property
    def model_ttft_ms(self) -> tuple[float, float, float]:
        """The prefill's ``sess.run`` alone (the model's time, without the step around it):
        ``(median over runs, low, high)``."""
        return _interval([r[0] for r in self.model_ms]) if self.model_ms else _NAN3

    @property
    def model_decode_tokens_per_s(self) -> tuple[float, float, float]:
        """Decode tokens/s of the model's ``sess.run`` alone: what the model can do, beside
        :attr:`decode_tokens_per_s`, what a generator gets (the whole step)."""
        return _decode_rate(self.model_ms, self.new_tokens, self.batch)

    @property
    def prefill_tokens_per_s(self) -> tuple[float, float, float]:
        """Prompt tokens per second of the prefill: ``(median over runs, low, high)``."""
        return _interval([1e3 * self.prompt * self.batch / r[0] for r in self.steps_ms])

    @property
    def decode_tokens_per_s(self) -> tuple[float, float, float]:
        """Tokens per second of the decode steps (all but the prefill), each run's tokens over
        its decode time: ``(median over runs, low, high)``; NaN with one new token."""
        return _decode_rate(self.steps_ms, self.new_tokens, self.batch)

    @table
    def per_token(self) -> Any:
        """One row per step: step, phase, past_length (tokens cached before it), ms (median
        over runs), low_ms, high_ms (the range over runs)."""
        import pandas as pd

        ms = np.asarray(self.steps_ms, dtype=np.float64)
        return pd.DataFrame(
            {
                "step": np.arange(ms.shape[1]),
                "phase": ["prefill"] + ["decode"] * (ms.shape[1] - 1),
                "past_length": [0] + [self.prompt + k for k in range(ms.shape[1] - 1)],
                "ms": np.median(ms, axis=0),
                "low_ms": ms.min(axis=0),
                "high_ms": ms.max(axis=0),
            }
        )

    def to_pandas(self) -> Any:
        """The :attr:`per_token` table."""
        return self.per_token

    def by_phase(self) -> Any:
        """The profiled generations' nodes per phase: phase, node, op_type, layer (from the
        graph's structure; layer_source says how: :attr:`layer_sources`), us_per_step (its
        own time per step of the phase: the median over the profiled generations' prefills,
        or over their decode steps; profiling on), share (of the phase's node time), calls;
        slowest first within each phase (:mod:`ortlab.analysis.generation.split`)."""
        return split.by_phase(self)

    def by_layer(self) -> Any:
        """:meth:`by_phase` summed per transformer layer: phase, layer (-1: outside the layers
        — embedding, final norm, head), us_per_step, share, nodes."""
        return split.by_layer(self)

    def layer(self, node: str) -> int | None:
        """A profiled node's transformer layer (None: outside the layers)."""
        if node in self.node_layers:
            return self.node_layers[node]
        return layer_from_name(node, self.layers)

    def phase_run_us(self) -> dict[str, float]:
        """The profiled generations' run time per step of each phase (µs, the median over the
        phase's kept steps, profiling on): about what :meth:`by_phase`'s node times add up to,
        less the gaps between nodes."""
        return split.phase_run_us(self)

    def outliers(self) -> list[tuple[str, int, int, float, float]]:
        """Profiled steps far from the same step unprofiled, left out of the split:
        (phase, profiled generation, step, profiled µs, unprofiled µs)
        (:func:`ortlab.analysis.generation.split.outliers`)."""
        return split.outliers(self)

    def ceilings(self) -> RooflineResult:
        """The ceilings the phases are set against, as a roofline with no rows (its
        ``peak_flops(dtype)``, ``peak_bytes(call_bytes)``, ``bandwidth``)."""
        return ceiling_lookup(self.config, self.peaks, self.cache_bytes)

    def roofline(self, phase: str = "decode") -> RooflineResult:
        """One phase's nodes against this machine's ceilings, as a roofline (its ``nodes``
        table, ``plot()`` and verdicts): ``us`` is the node's time per step of the phase."""
        found = next((r for r in self.roofs if r.phase == phase), None)
        if found is None:
            have = ", ".join(r.phase for r in self.roofs) or "none (generate(profile=True))"
            raise KeyError(f"no roofline for phase {phase!r}; this generation has: {have}")
        return roofline_of(
            found,
            model=self.model,
            config=self.config,
            peaks=self.peaks,
            cache_bytes=self.cache_bytes,
        )

    @table
    def phase_roofline(self) -> Any:
        """The weight multiplications (MatMulNBits, MatMul, Gemm… with an initializer input)
        per phase against their ceiling: phase, node, op_type, layer, us_per_step (as
        :meth:`by_phase`), flops, bytes, achieved_flops, peak_flops (the GEMM peak at its
        precision), achieved_bytes, bandwidth (the ceiling its bytes meet: in-cache when one
        call fits the last-level cache, else DRAM), dram_fraction (achieved bytes/s over
        DRAM's peak), achieved_fraction (of the roofline's bound), bound. In decode read the
        bandwidth columns, in prefill the FLOP/s ones."""
        import pandas as pd

        dram = self.ceilings().bandwidth
        rows = [
            {
                "phase": roof.phase,
                "node": r.node,
                "op_type": r.op_type,
                "layer": self.layer(r.node),
                "us_per_step": r.us,
                "flops": r.flops,
                "bytes": r.bytes,
                "achieved_flops": r.achieved_flops,
                "peak_flops": r.peak_flops,
                "achieved_bytes": r.achieved_bytes,
                "bandwidth": r.bandwidth,
                "dram_fraction": dram_fraction(r, dram),
                "achieved_fraction": r.achieved_fraction,
                "bound": r.bound,
            }
            for roof in self.roofs
            for r in roof.weight_rows()
        ]
        cols = ["phase", "node", "op_type", "layer", "us_per_step", "flops", "bytes"]
        cols += ["achieved_flops", "peak_flops", "achieved_bytes", "bandwidth", "dram_fraction"]
        frame = pd.DataFrame(rows, columns=[*cols, "achieved_fraction", "bound"])
        return frame.astype({"layer": "Int64"}).sort_values(
            ["phase", "us_per_step"], ascending=[False, False], ignore_index=True
        )

    @table
    def weights(self) -> Any:
        """The weight multiplications per phase and op type, their work over their time
        against the ceiling that phase meets: ``fraction`` of the bandwidth in decode (in-cache
        when a step's weights fit the last-level cache, else DRAM's; ``dram_fraction`` beside
        it), of the GEMM peak at their precision in the prefill (columns: phase, op_type,
        nodes, us_per_step, flops, bytes, achieved_flops, dtype, peak_flops, achieved_bytes,
        dram_bandwidth, bandwidth, ceiling, fraction, dram_fraction). Per node:
        :attr:`phase_roofline`."""
        return weights_summary(
            self.roofs, ceiling_lookup(self.config, self.peaks, self.cache_bytes)
        )

    @property
    def kv_cache(self) -> dict[str, float]:
        """The cache: bytes per token by formula and as the present outputs grew (measured;
        NaN with a shared buffer, allocated once at its full length), its size at prompt +
        new tokens (formula) and after the last step (measured: the present outputs, or the
        shared buffers)."""
        grown = np.diff(self.present_bytes) if len(self.present_bytes) > 1 else np.array([])
        per_token = float(np.median(grown)) if grown.size and not self.shared_buffer else math.nan
        return {
            "bytes_per_token": float(self.kv_bytes_per_token),
            "measured_bytes_per_token": per_token,
            "peak_bytes": float(self.kv_bytes_per_token * (self.prompt + self.new_tokens - 1)),
            "measured_peak_bytes": float(self.present_bytes[-1]) if self.present_bytes else 0.0,
            "rss_growth_bytes": float(self.rss_growth_bytes),
        }

    def headline(self) -> dict[str, Any]:
        """TTFT and decode tokens/s (the whole step, as a generator runs it), the prefill's
        tokens/s and the model's own sess.run figures, each ``{"median", "low", "high"}``
        (the interval from order statistics over runs; null below 6 runs), with what they
        are."""

        def three(v: tuple[float, float, float]) -> dict[str, float | None]:
            return {
                k: None if math.isnan(x) else round(x, 4)
                for k, x in zip(("median", "low", "high"), v, strict=True)
            }

        return {
            "ttft_ms": three(self.ttft_ms),
            "decode_tokens_per_s": three(self.decode_tokens_per_s),
            "prefill_tokens_per_s": three(self.prefill_tokens_per_s),
            "model_ttft_ms": three(self.model_ttft_ms),
            "model_decode_tokens_per_s": three(self.model_decode_tokens_per_s),
            "prompt": self.prompt,
            "new_tokens": self.new_tokens,
            "batch": self.batch,
            "runs": self.runs,
            "what": "median over runs of whole steps as a generator runs them (feeds, run, "
            "argmax, cache), profiling off; model_*: the model's sess.run alone",
            "other_cores": self.other_cores,
        }

    def __repr__(self) -> str:
        dec, ttft = self.decode_tokens_per_s[0], self.ttft_ms[0]
        return (
            f"<GenerationResult {self.model!r}: prompt {self.prompt}, {self.new_tokens} new "
            f"tokens x {self.runs} runs; TTFT {ttft:.2f} ms, decode {dec:.1f} tokens/s>"
        )


_NAN3 = (math.nan, math.nan, math.nan)


def require_decoder(m: Model, verb: str, instead: str) -> DecoderInfo:
    """``m``'s decoder, for a verb that runs a decoder alone token by token; refused with what
    to use ``instead`` when ``m`` is no decoder, and with what measures it today when it is an
    encoder-decoder (its decoder's steps at any dims; its encoder's file on its own)."""
    info = m.decoder
    if info is None:
        raise FeedError(
            f"{m.name!r} is not a decoder with a KV cache (no past_key_values.* inputs matched "
            f"by present.* outputs): {verb} runs decoders; {instead}"
        )
    if info.cross_pairs:
        raise FeedError(
            f"{m.name!r} is an encoder-decoder ({info.line()}): {verb} runs a decoder alone, "
            "token by token, and cannot yet run its encoder first and feed both caches. Its "
            "decoder's steps are measured by ortlab.benchmark / profile / placement at "
            "dims={'prompt': 1, 'past': 16} (a decode step; {'prompt': 4, 'past': 0} is the "
            "first step, its cross-attention cache empty), with the encoder's frames random; "
            f"its encoder by ortlab.benchmark on {info.encoder or 'the encoder file'} beside it."
        )
    return info


def _decode_rate(
    steps_ms: list[list[float]], new_tokens: int, batch: int
) -> tuple[float, float, float]:
    """Each run's decode tokens (all steps but the prefill, x batch) over their time: the
    median over runs with its interval; NaN with one new token."""
    if new_tokens < 2 or not steps_ms:
        return _NAN3
    return _interval([1e3 * (len(r) - 1) * batch / sum(r[1:]) for r in steps_ms if sum(r[1:])])


def _interval(values: list[float]) -> tuple[float, float, float]:
    mid, low, high, _ = median_with_interval(values)
    return mid, low, high


def generate(
    model: ModelLike,
    config: SessionConfig | Mapping[str, Any] | None = None,
    feeds: Mapping[str, Any] | None = None,
    *,
    prompt: int = 128,
    new_tokens: int = 64,
    runs: int = 6,
    batch: int = 1,
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
    past each step."""
    m = load(model)
    info = require_decoder(
        m, "ortlab.generate", "ortlab.benchmark times a single run of any model."
    )
    if new_tokens < 1 or prompt < 1 or runs < 1:
        raise ValueError(
            f"prompt, new_tokens and runs must be >= 1 (got {prompt}, {new_tokens}, {runs})"
        )
    given = None
    if feeds is not None:
        ids = np.asarray(feeds[info.input_ids]) if info.input_ids in feeds else None
        if ids is None or ids.ndim != 2:
            raise FeedError(
                f"generate's feeds give the prompt: {{{info.input_ids!r}: array [batch, prompt]}}; "
                "the mask, positions and cache are built each step."
            )
        batch, prompt = ids.shape
        given = ids
    if info.max_length is not None and prompt + new_tokens > info.max_length:
        raise FeedError(
            f"prompt {prompt} + {new_tokens} new tokens is beyond the {info.max_length} tokens "
            f"{m.name!r} is made for ({info.source}): generate fewer."
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
    if given is not None:
        inputs = dict(run.inputs)
        inputs[info.input_ids] = given.astype(np.asarray(inputs[info.input_ids]).dtype)
        run = run.with_(inputs=Feeds(inputs, run.inputs.dims, [], synthetic=False))
    can_share = info.attention == "GroupQueryAttention" and info.max_length is not None
    if share_buffer and not can_share:
        raise FeedError(
            f"share_buffer=True: {m.name!r} cannot write its cache in place (that needs "
            "GroupQueryAttention and a known max length, as onnxruntime-genai's builder makes)."
        )
    shared = (
        (info.max_length or 0)
        if can_share and share_buffer is not False and (share_buffer or info.share_buffer)
        else 0
    )
    reply = run_model_task(
        tasks_generate.generate,
        run,
        decoder=info,
        new_tokens=new_tokens,
        runs=runs,
        profile=profile,
        shared=shared,
        nodes=m.summary.node_count_total,
    )
    notes = [
        f"Each step is timed whole as a generator runs it (its feeds, sess.run, the argmax "
        "over the logits, the next step's cache: onnxruntime-genai's quantity), profiling "
        f"off, in a session warmed by an untimed {tasks_generate.WARMUP_STEPS}-step "
        f"generation; the prefill is step 0; decode tokens/s are each run's {new_tokens - 1} "
        "decode tokens over their time, the median over runs with an interval from order "
        "statistics (6 runs or more). The model's own sess.run within the steps: "
        "model_ttft_ms, model_decode_tokens_per_s.",
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
            + "; each node's time is its median over them (the prefill's) and over their "
            "decode steps; "
            + f"times are inflated by the profiler ({PROFILER_OVERHEAD}), shares hold; "
            + load_sentence(reply.profile.other_cores if reply.profile is not None else None)
            + "."
        )
    if run.synthetic:
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
        present_bytes=reply.present_bytes,
        rss_growth_bytes=reply.rss_after - reply.rss_before,
        decoder=info.line(),
        layers=info.layers,
        shared_buffer=shared,
        feeds=f"input_ids [{batch}, {prompt}]",
        synthetic=run.synthetic,
        other_cores=reply.other_cores,
        notes=notes,
        profile=reply.profile,
        profiled_steps=reply.profiled_steps,
        profiled_reps=reply.profiled_reps,
    )
    if reply.profile is None:
        return result
    far = result.outliers()
    if far:
        worst = max(far, key=lambda o: o[3] / max(o[4], 1.0))
        result = dataclasses.replace(
            result,
            notes=[
                *result.notes,
                f"{len(far)} profiled step(s) ran far from their unprofiled time (the worst: "
                f"{worst[0]} step {worst[2]} of profiled generation {worst[1]}, "
                f"{worst[3]:,.0f} µs against {worst[4]:,.0f} µs unprofiled, beyond the "
                "profiler's overhead): left out of by_phase()/by_layer() and the rooflines "
                "(see outliers()).",
            ],
        )
    found = m.layers
    if found is not None:
        names = reply.profile.node
        result = dataclasses.replace(
            result,
            node_layers={n: found.of(n) for n in names},
            layer_sources={n: found.source_of(n) for n in names},
        )
    roofs, peaks, more = phase_roofs(
        m,
        run,
        result.by_phase(),
        prompt=prompt,
        batch=batch,
        profiled_steps=reply.profiled_steps,
    )
    return dataclasses.replace(
        result,
        roofs=roofs,
        peaks=peaks,
        cache_bytes=last_level_cache_bytes(),
        notes=[*notes, *more],
    )
