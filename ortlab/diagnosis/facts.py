"""What the doctor knows, as data: :class:`Facts` (the session report, the model's op counts,
the profile, the placement, and the interleaved measurements the doctor took), folded stage by
stage from what each returns (:class:`Observed`, :class:`TransformerFusion`, the measured rows,
what it :class:`Said`), the :class:`Measured` candidates, the :class:`Finding` a rule returns,
the failures and the fixes tried; and the machine-load caveat every timed finding carries. The rules
(:mod:`ortlab.diagnosis.rules`) read these; the search (:mod:`ortlab.diagnosis.search`) makes them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError
from ortlab.core.machine import BUSY_CORES
from ortlab.core.model import Model
from ortlab.core.sessionreport import SessionReport
from ortlab.core.stats import NOISE_BAND, Paired, Verdict, interval_text
from ortlab.diagnosis.finding import Finding, Gain

if TYPE_CHECKING:
    import numpy as np

    from ortlab.analysis.limits.roofline import RooflineResult
    from ortlab.analysis.memory import FootprintResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.placement.whatifresult import WhatIfResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.analysis.quantization.quantize import Calibration
    from ortlab.analysis.quantization.variants import Signal
    from ortlab.analysis.soak import SoakResult
    from ortlab.diagnosis.generationfacts import GenerationFacts

__all__ = [
    "ATTENTION_OPS",
    "FINAL_MARK",
    "FUSED_TRANSFORMER_OPS",
    "QUANTIZED",
    "SMALL_MODEL_MS",
    "SWEEPS",
    "TIMING_STAGES",
    "Candidate",
    "CandidateFailure",
    "CandidateKey",
    "Facts",
    "Finding",
    "FixTried",
    "Gain",
    "Kind",
    "Measured",
    "Observed",
    "Said",
    "TransformerFusion",
    "baseline_ms",
    "busy_cores",
    "candidate_key",
    "load_caveat",
    "measured_row",
    "ran_op_types",
    "with_cosine",
]

FUSED_TRANSFORMER_OPS = frozenset(
    {
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "SkipLayerNormalization",
        "EmbedLayerNormalization",
        "BiasGelu",
        "FastGelu",
    }
)
ATTENTION_OPS = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention"})
"""The fused attention ops (a model or ORT's optimized graph with one has attention fused)."""
SMALL_MODEL_MS = 2.0
"""Below this latency per run, fixed per-run costs (input copies, profiler events) matter."""
TIMING_STAGES = ("screen", "combine", "generation")


class Kind(str, Enum):
    """What a candidate changes: the first part of its key (``level`` in ``level:all``)."""

    BASELINE = "baseline"
    ORIGINAL = "original"
    LEVEL = "level"
    THREADS = "threads"
    SPIN = "spin"
    IOBINDING = "iobinding"
    CPU_ONLY = "cpu-only"
    CUDA_GRAPH = "cuda-graph"
    MEMORY = "memory"
    SHARE_BUFFER = "share-buffer"
    VARIANT = "variant"
    SETTINGS = "settings"
    COMBINED = "combined"


SWEEPS = frozenset({Kind.THREADS, Kind.SPIN})
"""The thread and spinning sweep: the same model under other thread settings."""
QUANTIZED = ("quant-static", "quant-dynamic")
"""The int8 variants the doctor builds (``variant:quant-static``…): those a fix can mend."""
FINAL_MARK = "+final"


def candidate_key(kind: Kind, arg: str = "", *, final: bool = False) -> str:
    """The one spelling of a candidate's key: ``level:all``, ``iobinding``,
    ``variant:quant-static+final`` (re-measured in the final stage)."""
    return kind.value + (f":{arg}" if arg else "") + (FINAL_MARK if final else "")


@dataclass(frozen=True)
class CandidateKey:
    """A key read back: its kind, its argument, whether it is a final re-measurement."""

    kind: Kind
    arg: str = ""
    final: bool = False

    @classmethod
    def parse(cls, key: str) -> CandidateKey:
        final = key.endswith(FINAL_MARK)
        head, _, arg = key.removesuffix(FINAL_MARK).partition(":")
        return cls(Kind(head), arg, final)

    @property
    def base(self) -> str:
        """The candidate's key without the final stage's mark: ``threads:1``."""
        return candidate_key(self.kind, self.arg)

    @property
    def is_variant(self) -> bool:
        return self.kind is Kind.VARIANT

    @property
    def is_sweep(self) -> bool:
        return self.kind in SWEEPS


class Candidate(NamedTuple):
    """One thing the doctor times: its key (:func:`candidate_key`), the model (the original or a
    variant), the session config and the steps that made the model."""

    key: str
    model: Model
    config: SessionConfig
    steps: list[str]

    @property
    def parsed(self) -> CandidateKey:
        return CandidateKey.parse(self.key)


@dataclass(frozen=True)
class Measured:
    """One candidate the doctor timed interleaved against the baseline (and its output error)."""

    key: str
    """What was changed (:func:`candidate_key`): 'baseline', 'level:all', 'threads:1',
    'spin:off', 'iobinding', 'variant:transformers', 'variant:quant-dynamic', 'combined' …"""
    label: str
    variant: str
    """'original' or the model variant's name."""
    model_path: str
    config: SessionConfig
    p50_ms: float
    paired: Paired
    """Paired time ratio to the baseline (median of per-round ratios; < 1 is faster), its
    interval, the verdict ('baseline' for the baseline itself), the rounds behind it and the
    interval's coverage: what ``significant`` and ``confidence`` read."""
    cosine: float
    """Lowest output cosine similarity against the baseline's outputs (1.0 = same)."""
    file_bytes: int
    """On disk, external data included (``Model.disk_bytes``)."""
    stage: str
    """'screen' (one change at a time) or 'final' (combined settings, re-measured)."""
    steps: list[str] = field(default_factory=list)
    """How the model variant was made."""

    @property
    def significant(self) -> bool:
        """The interval lies beyond the noise band (``Paired.significant``)."""
        return self.paired.significant

    @property
    def confidence(self) -> float:
        """The interval's actual coverage; NaN when the rounds were too few for one."""
        return self.paired.confidence

    @property
    def faster(self) -> bool:
        return self.significant and self.paired.ratio < 1

    @property
    def slower(self) -> bool:
        return self.significant and self.paired.ratio > 1

    @property
    def no_gain(self) -> bool:
        """The interval excludes a gain beyond the noise band: "no faster" is said only then
        (a wide interval that still allows one is undecided, never "no faster")."""
        return not math.isnan(self.paired.low) and self.paired.low >= 1 - NOISE_BAND

    def speed_word(self) -> str:
        """'faster', 'no faster', or 'undecided (interval [low, high])'."""
        p = self.paired
        if self.faster:
            return "faster"
        if self.no_gain:
            return "no faster"
        if math.isnan(p.low):
            return "undecided (too few rounds for an interval)"
        return f"undecided (time ratio {interval_text(p.ratio, p.low, p.high, 2)})"


@dataclass(frozen=True)
class CandidateFailure:
    """A candidate the doctor could not build, time or evaluate; it was left out, the others
    were measured."""

    what: str
    """The candidate in words: 'static QDQ minmax per-channel', 'candidate iobinding (…)'."""
    message: str
    """What went wrong, in the words of the tool that failed (ORT's message), or the exception
    type when it gave none."""
    stage: str
    """'build' (making the variant), 'timing' (its session or first run in the worker),
    'accuracy' (its outputs) or 'explain' (profiling a slower variant)."""
    code: str = ""
    """Python that reproduces the failing step alone."""


@dataclass(frozen=True)
class FixTried:
    """The fix variants of one int8 variant (``ErrorResult.fix``) the doctor measured."""

    nodes: list[str]
    """The worst nodes they spare."""
    variants: dict[str, str]
    """Measured key -> how the nodes are spared ('left in float', 'their outputs quantized
    to 16 bits')."""


@dataclass(frozen=True)
class Observed:
    """What the doctor's first stage saw of the baseline session: profiled (op time shares,
    the median run with the profiler on), the placement join when an accelerator EP loaded, the
    what-if partition of a requested NPU EP that did not. Every later stage reads it."""

    model_name: str
    requested: SessionConfig
    report: SessionReport
    op_counts: dict[str, int]
    profiled_ms: float
    """Median model_run with ORT's profiler on."""
    symbolic_inputs: dict[str, list[str]] = field(default_factory=dict)
    op_time_share: dict[str, float] = field(default_factory=dict)
    placement: PlacementResult | None = None
    initializer_blocker: str | None = None
    cores: int = 1
    min_cosine: float = 0.999
    allocator: dict[str, float] = field(default_factory=dict)
    predicted: WhatIfResult | None = None
    predicted_fixed: WhatIfResult | None = None
    roofline: RooflineResult | None = None
    """A RooflineResult of the baseline (None where the EP compiles the graph)."""
    compute_in_bodies: int = 0
    """MatMul/Gemm/Conv nodes inside If/Loop/Scan bodies (an optimum merged decoder's)."""


@dataclass(frozen=True)
class TransformerFusion:
    """What the transformers optimizer fused, or why it could not fuse attention."""

    fused: dict[str, int] = field(default_factory=dict)
    attention_reason: str | None = None


@dataclass(frozen=True)
class CpuCost:
    """One candidate's CPU cost, measured in rounds beside the baseline."""

    key: str
    label: str
    config: SessionConfig
    cpu_ms: float
    """CPU time per run over every thread of the session's process (median over rounds)."""
    wall_ms: float
    """Wall time per run in the same blocks (median over rounds): the cores it keeps busy
    while running are ``cpu_ms / wall_ms``."""
    idle_cores: float
    """Cores the process kept busy in the :data:`~ortlab.core.machine.IDLE_WINDOW_S` after
    its runs while nothing ran (its pool spinning), median over rounds."""
    paired: Paired
    """CPU per run against the baseline's, per round (< 1: less CPU), its interval and the
    sentence; 'baseline' for the baseline itself."""

    @property
    def cores(self) -> float:
        """Cores busy while running: CPU time over wall time."""
        return self.cpu_ms / self.wall_ms if self.wall_ms > 0 else math.nan

    @property
    def saves(self) -> bool:
        """Its CPU per run is lower than the baseline's beyond noise (the whole interval)."""
        return self.paired.significant and self.paired.ratio < 1


@dataclass(frozen=True)
class CpuCosts:
    """What the CPU stage returns: a row per candidate measured (the baseline first), how the
    rounds ran, and what it left out and why."""

    rows: dict[str, CpuCost] = field(default_factory=dict)
    rounds: int = 0
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def baseline(self) -> CpuCost | None:
        return self.rows.get("baseline")


@dataclass(frozen=True)
class Said:
    """What a stage has to say besides its facts: its notes, the candidates that failed, and
    what the budget left out (said once, last, with the budget that would measure them)."""

    notes: tuple[str, ...] = ()
    failures: tuple[CandidateFailure, ...] = ()
    skipped: tuple[str, ...] = ()
    need_s: float = 0.0
    """The budget that would measure what was skipped, where known (0: not known)."""

    def then(self, later: Said) -> Said:
        """This, then what a later stage said (a thing skipped twice is said once)."""
        return Said(
            self.notes + later.notes,
            self.failures + later.failures,
            self.skipped + tuple(s for s in later.skipped if s not in self.skipped),
            max(self.need_s, later.need_s),
        )


Outputs = list[dict[str, "np.ndarray"]]
"""A candidate's outputs on the evaluation samples, one mapping per sample."""


@dataclass(frozen=True)
class Facts:
    """What the doctor knows, the one type its stages read and return: what the first stage saw
    (``seen``, read as ``f.seen.report``…), then what each later stage added, in order. A stage
    reads these facts, frozen, and returns new ones in its
    :class:`~ortlab.diagnosis.outcome.Outcome` (``dataclasses.replace(facts, footprint=…)``);
    :meth:`heard` adds what it said. The rules read the last; tests build them by hand. A new
    measurement is a field here and the stage that fills it."""

    seen: Observed
    """The baseline session as the first stage saw it (report, op counts, profile shares…)."""
    measured: Mapping[str, Measured] = field(default_factory=dict)
    """The candidates' rows: the screen's, with cosines, then the final stage's."""
    items: tuple[Candidate, ...] = ()
    """The candidates: built, then screened, with the quantization fixes added."""
    latencies: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Every run's latency (ns) per candidate key, over the stages that timed it."""
    outputs: Mapping[str, Outputs] = field(default_factory=dict)
    """Each candidate's outputs on :attr:`samples` (``baseline``: the reference)."""
    profile: ProfileResult | None = None
    """The baseline's profile (the observe stage's)."""
    samples: Calibration | None = None
    """The evaluation samples every output is computed on (the accuracy stage's)."""
    runs: int = 3
    """Runs per measurement in the screen."""
    rounds: int = 0
    """Interleaved rounds the screen gave its survivors."""
    fusion: TransformerFusion = field(default_factory=TransformerFusion)
    variant_signals: tuple[Signal, ...] = ()
    """Why each slower model variant is slower."""
    quant_fixes: Mapping[str, FixTried] = field(default_factory=dict)
    """int8 variant key -> the fix tried for it (its measured variants are in ``measured``)."""
    footprint: FootprintResult | None = None
    """A FootprintResult: the resident memory of the session and of each memory setting."""
    soak: SoakResult | None = None
    """Whether the session's memory grows run after run (a short ``ortlab.soak``)."""
    generation: GenerationFacts | None = None
    """For an LLM decoder: a :class:`~ortlab.diagnosis.generation.GenerationFacts` (the
    candidates measured in generation), None otherwise or when not measured."""
    cpu: CpuCosts | None = None
    """CPU per run and idle cores of the baseline and the thread and spinning candidates
    (:func:`~ortlab.diagnosis.cpu.cpu_stage`; None when not measured)."""
    said: Said = field(default_factory=Said)
    """What the stages so far said: notes, failures, what the budget left out."""
    other_cpu: Mapping[str, float] = field(default_factory=dict)
    """Stage → cores other processes used on average during it (see ``ortlab.doctor``)."""
    logical_cpus: int = 0
    """Logical CPUs of the machine: what ``other_cpu`` is a share of."""

    def heard(self, said: Said) -> Facts:
        """These facts with what a stage said after the others'."""
        return dataclasses.replace(self, said=self.said.then(said))

    @property
    def baseline_ms(self) -> float:
        """The baseline's median run in the screen (profiling off), or the profiled median
        when the screen did not time it."""
        return baseline_ms(self.seen, self.measured)

    @property
    def failures(self) -> tuple[CandidateFailure, ...]:
        return self.said.failures

    @property
    def attention_reason(self) -> str | None:
        """Why the transformers optimizer could not fuse attention (None: not tried or fused)."""
        return self.fusion.attention_reason

    @property
    def transformer_fused(self) -> Mapping[str, int]:
        return self.fusion.fused

    def accurate(self, v: Measured) -> bool:
        """Output cosine >= the doctor's min_cosine; NaN means the same model under other
        settings (not compared in the screen; the final combination is)."""
        return math.isnan(v.cosine) or v.cosine >= self.seen.min_cosine

    def eval_samples(self) -> Calibration:
        """The accuracy stage's samples (a stage that computes outputs runs after it)."""
        if self.samples is None:
            raise OrtlabError("no evaluation samples: the accuracy stage has not run")
        return self.samples


def baseline_ms(seen: Observed, measured: Mapping[str, Measured]) -> float:
    """The baseline's latency as the doctor knows it so far: its median in the screen
    (profiling off) once timed, the profiled median before."""
    base = measured.get("baseline")
    return base.p50_ms if base is not None else seen.profiled_ms


def ran_op_types(seen: Observed) -> set[str]:
    """The op types ORT ran for the baseline (its optimized graph: the profile's op types and
    the placement's), without their domain; empty when neither was recorded."""
    ops = set(seen.op_time_share)
    if seen.placement is not None:
        ops |= {str(r.op_type) for r in seen.placement.optimized_rows}
    return {o.rsplit(".", 1)[-1] for o in ops}


def busy_cores(f: Facts) -> float | None:
    """The most cores other processes used during a timing stage (None: not recorded)."""
    busy = [f.other_cpu[s] for s in TIMING_STAGES if not math.isnan(f.other_cpu.get(s, math.nan))]
    return max(busy) if busy else None


def load_caveat(f: Facts) -> str:
    """'measured while other processes used 1.4 of 2 cores: …' when other processes used more
    than BUSY_CORES during the timing stages (thread and spinning results then describe a busy
    machine), else ''."""
    busy = busy_cores(f)
    if busy is None or busy <= BUSY_CORES:
        return ""
    of = f" of {f.logical_cpus}" if f.logical_cpus else ""
    return (
        f"measured while other processes used {busy:.1f}{of} cores: this advice holds "
        "for a busy machine; re-run the doctor idle"
    )


def measured_row(
    key: str,
    mm: Model,
    c: SessionConfig,
    steps: list[str],
    v: Verdict,
    *,
    p50: float,
    stage: str,
    against: str,
    variant: str,
) -> Measured:
    """One candidate's timing as a :class:`Measured` row (its cosine comes later)."""
    label = c.label() if variant == "original" else f"{variant} · {c.label()}"
    return Measured(
        key=key,
        label=label,
        variant=variant,
        model_path=str(mm.path),
        config=c.with_(fallback="warn"),
        p50_ms=p50,
        paired=Paired.of(v, "baseline" if key == "baseline" else v.text(against, label)),
        cosine=float("nan"),
        file_bytes=mm.disk_bytes,
        stage=stage,
        steps=list(steps),
    )


def with_cosine(m: Measured, cosine: float) -> Measured:
    """``m`` with its output cosine."""
    return dataclasses.replace(m, cosine=cosine)
