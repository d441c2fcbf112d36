"""``ortlab.generate``'s result: greedy generations of a decoder (an encoder-decoder's encoder
before each), every step timed, with the profiled split by phase and layer and the roofline per
phase."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ortlab.analysis.generation import split
from ortlab.analysis.generation.phases import (
    PhaseRoof,
    ceiling_lookup,
    dram_fraction,
    roofline_of,
    weights_summary,
)
from ortlab.analysis.limits.ceilings import Peak
from ortlab.analysis.limits.roofline import RooflineResult
from ortlab.analysis.profiling import ProfileResult
from ortlab.core.config import SessionConfig
from ortlab.core.layers import layer_from_name
from ortlab.core.machine import CacheLevel
from ortlab.core.result import Result, Table, table
from ortlab.core.stats import median_with_interval
from ortlab.core.units import fmt_ms, fmt_rate, tokens_per_s
from ortlab.engine.session import SessionReport
from ortlab.engine.trace import ProfileData, select_runs

__all__ = ["GenerationResult"]


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
    """By formula: 2 x the layers whose cache grows x KV heads x head size x element size
    (x batch); a sliding-window layer's fixed buffer is :attr:`fixed_cache_bytes`."""
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
    fixed_cache_bytes: int = 0
    """What a step carries whatever the length (x batch; ``DecoderInfo.fixed_bytes``): the
    sliding-window layers' fixed cache buffers and a hybrid decoder's carried states; 0
    where every cache grows."""
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
    """More generations with ORT's profiler on (times inflated by it, each node by about the
    same: the notes say whether the shares hold, from this call's profiled and unprofiled
    steps): run k of the trace is step k % profiled_steps (0: the prefill) of generation
    k // profiled_steps."""
    profiled_steps: int = 0
    """Steps each profiled generation covers (all, unless the trace would pass ORT's cap)."""
    profiled_reps: int = 1
    """Profiled generations: a phase's split is each node's median over them and over the
    phase's steps, profiled steps far from their unprofiled time left out (:meth:`outliers`)."""
    first_steps: int = 0
    """After the profiled generations, this many of their first step alone (the trace's last
    runs, each a prefill after its encoder): the once-a-generation phases' extra samples."""
    roofs: list[PhaseRoof] = field(default_factory=list)
    """The roofline per phase (:mod:`ortlab.analysis.generation.phases`): prefill, decode."""
    peaks: list[Peak] = field(default_factory=list)
    """The ceilings the phases are set against (measured with ORT under the same settings)."""
    levels: tuple[CacheLevel, ...] = ()
    """The machine's cache levels (a call whose bytes fit one is set against its bandwidth)."""
    encoder: str = ""
    """An encoder-decoder's encoder (its model name: 'encoder_model'), run once per generation
    before the decoder's first step ('' for a decoder alone)."""
    encoder_ms: list[float] = field(default_factory=list)
    """Per run: the encoder's whole step (its run and binding its states for the decoder);
    part of :attr:`ttft_ms`."""
    encoder_model_ms: list[float] = field(default_factory=list)
    """Per run: the encoder's ``sess.run`` alone."""
    encoder_profile: ProfileData | None = None
    """The encoder's profiled runs (one per profiled generation): ``by_phase()``'s 'encoder'."""
    encoder_layers: dict[str, int | None] = field(default_factory=dict)
    """Each profiled encoder node's layer, read from the encoder's graph."""
    report: SessionReport | None = None
    """The generating session's EPs, their nodes and what fell back (None in a result saved
    before it was kept)."""

    @property
    def runs(self) -> int:
        return len(self.steps_ms)

    @property
    def ttft_ms(self) -> tuple[float, float, float]:
        """Time to first token (the prefill's whole step; an encoder-decoder's encoder step
        before it included): ``(median over runs, low, high)``, the interval from order
        statistics (NaN with fewer than 6 runs)."""
        return _interval(_first_steps(self.steps_ms, self.encoder_ms))

    @property
    def encoder_step_ms(self) -> tuple[float, float, float]:
        """An encoder-decoder's encoder run, whole (part of TTFT): ``(median over runs, low,
        high)``; NaN for a decoder alone."""
        return _interval(self.encoder_ms) if self.encoder_ms else _NAN3

    @property
    def model_ttft_ms(self) -> tuple[float, float, float]:
        """The prefill's ``sess.run`` alone (the model's time, without the step around it):
        ``(median over runs, low, high)``."""
        if not self.model_ms:
            return _NAN3
        return _interval(_first_steps(self.model_ms, self.encoder_model_ms))

    @property
    def model_decode_tokens_per_s(self) -> tuple[float, float, float]:
        """Decode tokens/s of the model's ``sess.run`` alone: what the model can do, beside
        :attr:`decode_tokens_per_s`, what a generator gets (the whole step)."""
        return _decode_rate(self.model_ms, self.new_tokens, self.batch)

    @property
    def prefill_tokens_per_s(self) -> tuple[float, float, float]:
        """Prompt tokens per second of the prefill: ``(median over runs, low, high)``."""
        return _interval([tokens_per_s(self.prompt * self.batch, r[0]) for r in self.steps_ms])

    @property
    def decode_tokens_per_s(self) -> tuple[float, float, float]:
        """Tokens per second of the decode steps (all but the prefill), each run's tokens over
        its decode time: ``(median over runs, low, high)``; NaN with one new token."""
        return _decode_rate(self.steps_ms, self.new_tokens, self.batch)

    @table
    def per_token(self) -> Table:
        """One row per step: step, phase, past_length (tokens cached before it), ms (median
        over runs), low_ms, high_ms (the range over runs). An encoder-decoder's encoder is
        step -1, phase 'encoder' (before the decoder's first step)."""
        import pandas as pd

        ms = np.asarray(self.steps_ms, dtype=np.float64)
        frame = pd.DataFrame(
            {
                "step": np.arange(ms.shape[1]),
                "phase": ["prefill"] + ["decode"] * (ms.shape[1] - 1),
                "past_length": [0] + [self.prompt + k for k in range(ms.shape[1] - 1)],
                "ms": np.median(ms, axis=0),
                "low_ms": ms.min(axis=0),
                "high_ms": ms.max(axis=0),
            }
        )
        if not self.encoder_ms:
            return frame
        enc = np.asarray(self.encoder_ms, dtype=np.float64)
        row = {"step": -1, "phase": "encoder", "past_length": 0, "ms": float(np.median(enc))}
        row |= {"low_ms": float(enc.min()), "high_ms": float(enc.max())}
        return pd.concat([pd.DataFrame([row]), frame], ignore_index=True)

    def to_pandas(self) -> Table:
        """The :attr:`per_token` table."""
        return self.per_token

    def by_phase(self) -> Table:
        """The profiled generations' nodes per phase: phase, node, op_type, layer (from the
        graph's structure; layer_source says how: :attr:`layer_sources`), us_per_step (its
        own time per step of the phase: the median over the profiled generations' prefills,
        or over their decode steps; profiling on), share (of the phase's node time), calls;
        slowest first within each phase (:mod:`ortlab.analysis.generation.split`)."""
        return split.by_phase(self.timeline)

    def by_layer(self) -> Table:
        """:meth:`by_phase` summed per transformer layer: phase, layer (-1: outside the layers
        — embedding, final norm, head), us_per_step, share, nodes."""
        return split.by_layer(self.timeline)

    @property
    def timeline(self) -> split.Timeline:
        """What :meth:`by_phase` and its kin read: the steps' times, the traces, the layers."""
        return split.Timeline(
            steps_ms=self.steps_ms,
            model_ms=self.model_ms,
            profile=self.profile,
            encoder_profile=self.encoder_profile,
            encoder_layers=self.encoder_layers,
            profiled_steps=self.profiled_steps,
            profiled_reps=self.profiled_reps,
            first_steps=self.first_steps,
            layer_sources=self.layer_sources,
            layer=self.layer,
        )

    def layer(self, node: str) -> int | None:
        """A profiled node's transformer layer (None: outside the layers)."""
        if node in self.node_layers:
            return self.node_layers[node]
        if node in self.encoder_layers:
            return self.encoder_layers[node]
        return layer_from_name(node, self.layers)

    def phase_run_us(self) -> dict[str, float]:
        """The profiled generations' run time per step of each phase (µs, the median over the
        phase's kept steps, profiling on): about what :meth:`by_phase`'s node times add up to,
        less the gaps between nodes."""
        return split.phase_run_us(self.timeline)

    def phase_profile(self, phase: str = "decode") -> ProfileResult:
        """One phase's profiled steps as a profile (its ``by_node``, ``by_op_type``, plots):
        the runs :meth:`by_phase` reads for that phase, so each node's time here is its
        ``us_per_step`` there, and the median run is :meth:`phase_run_us`'s."""
        runs = split.phase_runs(self.timeline).get(phase)
        if self.profile is None or not runs:
            have = ", ".join(k for k, v in split.phase_runs(self.timeline).items() if v)
            raise KeyError(
                f"no profiled {phase!r} steps in this generation (profiled: "
                f"{have or 'none: generate(profile=True)'})"
            )
        kept = len(runs)
        if phase == "decode":
            last = self.prompt + self.profiled_steps - 2
            what = (
                f"the decode steps of {self.profiled_reps} profiled generations (steps 1 to "
                f"{self.profiled_steps - 1}, {self.prompt} to {last} tokens cached)"
            )
        else:
            what = f"the prefills of the profiled generations ({self.prompt} tokens)"
        return ProfileResult(
            model=self.model,
            config=self.config,
            data=select_runs(self.profile, runs),
            report=self.report,
            notes=[
                f"Runs: {what}, {kept} kept (steps far from their unprofiled time left out, "
                "as by_phase leaves them); times with ORT's profiler on.",
                f"Feeds: {self.feeds}.",
            ],
            feeds=f"{what}; {self.feeds}",
            synthetic=self.synthetic,
        )

    def outliers(self) -> list[tuple[str, int, int, float, float]]:
        """Profiled steps far from the same step unprofiled, left out of the split:
        (phase, profiled generation, step, profiled µs, unprofiled µs)
        (:func:`ortlab.analysis.generation.split.outliers`)."""
        return split.outliers(self.timeline)

    def ceilings(self) -> RooflineResult:
        """The ceilings the phases are set against, as a roofline with no rows (its
        ``peak_flops(dtype)``, ``peak_bytes(call_bytes)``, ``bandwidth``)."""
        return ceiling_lookup(self.config, self.peaks, self.levels)

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
            levels=self.levels,
        )

    @table
    def phase_roofline(self) -> Table:
        """The weight multiplications (MatMulNBits, MatMul, Gemm… with an initializer input)
        per phase against their ceiling: phase, node, op_type, layer, us_per_step (as
        :meth:`by_phase`), flops, bytes, achieved_flops, peak_flops (the GEMM peak at its
        precision), achieved_bytes, bandwidth (the ceiling its bytes meet: the nearest cache
        level one call fits, else DRAM), ceiling (the roof the phase is read against, in words:
        in decode 'L3-resident: 8.4 MB of weights, L3 32 MB' or 'DRAM', in the prefill the
        GEMM peak at its precision), dram_fraction (achieved bytes/s over
        DRAM's peak), achieved_fraction (of the roofline's bound), bound. In decode read the
        bandwidth columns, in prefill the FLOP/s ones."""
        import pandas as pd

        lookup = self.ceilings()
        dram = lookup.bandwidth
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
                "ceiling": lookup.ceiling_of(r).label(r.bytes, "weights")
                if roof.phase == "decode"
                else f"{r.dtype} GEMM peak",
                "dram_fraction": dram_fraction(r, dram),
                "achieved_fraction": r.achieved_fraction,
                "bound": r.bound,
            }
            for roof in self.roofs
            for r in roof.weight_rows()
        ]
        cols = ["phase", "node", "op_type", "layer", "us_per_step", "flops", "bytes"]
        cols += ["achieved_flops", "peak_flops", "achieved_bytes", "bandwidth", "ceiling"]
        cols += ["dram_fraction"]
        frame = pd.DataFrame(rows, columns=[*cols, "achieved_fraction", "bound"])
        return frame.astype({"layer": "Int64"}).sort_values(
            ["phase", "us_per_step"], ascending=[False, False], ignore_index=True
        )

    @table
    def weights(self) -> Table:
        """The weight multiplications per phase and op type, their work over their time
        against the ceiling that phase meets: ``fraction`` of the bandwidth in decode (the
        nearest cache level a step's weights fit, else DRAM's; ``dram_fraction`` beside
        it), of the GEMM peak at their precision in the prefill (columns: phase, op_type,
        nodes, us_per_step, flops, bytes, achieved_flops, dtype, peak_flops, achieved_bytes,
        dram_bandwidth, bandwidth, ceiling, fraction, dram_fraction). Per node:
        :attr:`phase_roofline`."""
        return weights_summary(self.roofs, self.ceilings())

    @property
    def cache_bytes(self) -> int:
        """What the session's threads hold in the outermost cache level (0: unknown)."""
        return self.ceilings().cache_bytes

    @property
    def kv_cache(self) -> dict[str, float]:
        """The cache: bytes per token by formula (the growing layers'; a sliding-window
        layer's fixed buffer is counted once in the peak) and as the present outputs grew (measured;
        NaN with a shared buffer, allocated once at its full length), its size at prompt +
        new tokens (formula) and after the last step (measured: the present outputs, or the
        shared buffers)."""
        grown = np.diff(self.present_bytes) if len(self.present_bytes) > 1 else np.array([])
        per_token = float(np.median(grown)) if grown.size and not self.shared_buffer else math.nan
        return {
            "bytes_per_token": float(self.kv_bytes_per_token),
            "measured_bytes_per_token": per_token,
            "peak_bytes": float(
                self.kv_bytes_per_token * (self.prompt + self.new_tokens - 1)
                + self.fixed_cache_bytes
            ),
            "measured_peak_bytes": float(self.present_bytes[-1]) if self.present_bytes else 0.0,
            "rss_growth_bytes": float(self.rss_growth_bytes),
        }

    def headline(self) -> dict[str, object]:
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
            "argmax, cache), profiling off; model_*: the model's sess.run alone"
            + ("; TTFT includes the encoder's run (encoder_ms)" if self.encoder_ms else ""),
            "other_cores": self.other_cores,
        } | (
            {
                "encoder": self.encoder,
                "encoder_ms": three(self.encoder_step_ms),
                "feeds": self.feeds,
            }
            if self.encoder_ms
            else {}
        )

    def __repr__(self) -> str:
        dec, ttft = self.decode_tokens_per_s[0], self.ttft_ms[0]
        return (
            f"<GenerationResult {self.model!r}: prompt {self.prompt}, {self.new_tokens} new "
            f"tokens x {self.runs} runs; TTFT {fmt_ms(ttft)}, decode {fmt_rate(dec, 'tokens/s')}>"
        )


_NAN3 = (math.nan, math.nan, math.nan)


def _first_steps(steps_ms: list[list[float]], encoder_ms: list[float]) -> list[float]:
    """Each run's first token: its prefill step, after its encoder's run where there is one."""
    if not encoder_ms:
        return [r[0] for r in steps_ms]
    return [e + r[0] for e, r in zip(encoder_ms, steps_ms, strict=True)]


def _decode_rate(
    steps_ms: list[list[float]], new_tokens: int, batch: int
) -> tuple[float, float, float]:
    """Each run's decode tokens (all steps but the prefill, x batch) over their time: the
    median over runs with its interval; NaN with one new token."""
    if new_tokens < 2 or not steps_ms:
        return _NAN3
    return _interval(
        [tokens_per_s((len(r) - 1) * batch, sum(r[1:])) for r in steps_ms if sum(r[1:])]
    )


def _interval(values: list[float]) -> tuple[float, float, float]:
    mid, low, high, _ = median_with_interval(values)
    return mid, low, high
