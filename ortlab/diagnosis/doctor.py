"""The doctor: find what slows a session down, and prove each fix by measuring it.

Pipeline: observe (profile, placement when an accelerator loaded, the session report, the graph)
→ build candidate fixes (settings and model variants) → screen them interleaved with the
baseline in the worker, prune the clearly slower ones, measure the survivors more → combine the
winners and re-measure the combination against the baseline → rules
(:mod:`ortlab.diagnosis.rules`) turn the facts and measurements into findings. Every gain is a
paired, interleaved verdict with a distribution-free interval of at least 95 %
(:func:`ortlab.paired_ratio`; 6 rounds or more, else no verdict); nothing is inferred from a
checklist. A candidate that fails is a finding, and the others go on. How much CPU other
processes used during each stage is recorded, since thread and spinning advice measured on a
busy machine does not hold on an idle one."""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortlab.analysis.benchmark import environment
from ortlab.analysis.limits.roofline import RooflineResult
from ortlab.analysis.memory import FootprintResult
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.placement.whatifresult import WhatIfResult
from ortlab.analysis.profiling import ProfileResult
from ortlab.analysis.soak import SoakResult
from ortlab.core.config import SessionConfig
from ortlab.core.decoderinputs import ROLES
from ortlab.core.display import render
from ortlab.core.eps import compiling
from ortlab.core.machine import MIN_LOAD_WINDOW_S, CpuSample, cpu_sample, other_cores
from ortlab.core.model import ModelLike, load
from ortlab.core.result import Result, Table
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, PAIRED_COLUMNS, spread
from ortlab.diagnosis import search
from ortlab.diagnosis.best import Best, loaded_only
from ortlab.diagnosis.budget import Budget, StageBudget
from ortlab.diagnosis.cpu import CPU_COLUMNS, cheapest, check_objective, search_cpu
from ortlab.diagnosis.facts import (
    CandidateKey,
    CpuCosts,
    Facts,
    Finding,
    Measured,
    Said,
    busy_cores,
    load_caveat,
)
from ortlab.diagnosis.generation import (
    baseline_generation,
    best_in_generation,
    generation_stage,
    generation_step,
)
from ortlab.diagnosis.generationfacts import GenerationFacts
from ortlab.diagnosis.outcome import Outcome, outcome, run_stage
from ortlab.diagnosis.rules import run_rules
from ortlab.diagnosis.search import observe
from ortlab.diagnosis.stages import Plan, run_plan
from ortlab.diagnosis.verify import combine
from ortlab.engine.calls import as_config, edge

if TYPE_CHECKING:
    import pandas as pd

    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["Best", "CpuSample", "DoctorResult", "cpu_sample", "doctor", "other_cores"]


@dataclass(frozen=True)
class DoctorResult(Result):
    """Findings (most costly first), every measured candidate, the best and the Pareto set.

    ``plot(kind)``: 'candidates' (time ratio with its interval per candidate, the default),
    'threads' (the sweep curve) or 'pareto' (latency vs output error, size as marker area).
    """

    model: str
    model_path: str
    requested: SessionConfig
    findings: list[Finding]
    measured: list[Measured]
    best: Best
    baseline_ms: float
    rounds: int
    runs: int
    budget_s: float
    elapsed_s: float
    environment: dict[str, str]
    profile: ProfileResult | None = None
    """The baseline's ProfileResult (the report's profile charts)."""
    placement: PlacementResult | None = None
    whatif: WhatIfResult | None = None
    """For a requested NPU EP that does not run here: its predicted partition (at the timed
    shapes when the model's are dynamic), which the npu_partition finding rests on."""
    memory: FootprintResult | None = None
    """The session's resident memory and each memory setting's, in fresh processes (the
    memory finding rests on it); None with ``memory=False``."""
    soak: SoakResult | None = None
    """Whether the session's memory grows run after run (a short soak: as configured and with
    the arena off; the memory_growth finding rests on it); None when not measured."""
    roofline: RooflineResult | None = None
    """The baseline's node times against this machine's measured peaks (None where an EP
    compiles the graph); its profile is :attr:`profile`."""
    step: dict[str, int] = field(default_factory=dict)
    """A decoder's step where the doctor chose it (batch, prompt, past: its generation's mean
    decode step), which a report of this result measures at too; {} otherwise."""
    generation: GenerationFacts | None = None
    """For an LLM decoder: its profiled baseline generation (phases, layers, the roofline per
    phase) and each candidate measured in generation against it (:meth:`generation_trials`)."""
    cpu: CpuCosts | None = None
    """The CPU per run and idle cores of the baseline and each thread and spinning candidate
    (every screened candidate with ``objective="cpu"``): :meth:`cpu_costs`."""
    objective: str = "latency"
    """What ``best`` was chosen for: 'latency' (the shortest run) or 'cpu' (the least CPU per
    run)."""
    notes: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)
    """Seconds spent per stage (observe, build variants, screen, accuracy, combine, explain)."""
    other_cpu: dict[str, float] = field(default_factory=dict)
    """Stage → cores other processes used on average during it (all processes' CPU time minus
    this process's and its worker's, over the stage's wall time), of
    ``environment['cpu_count']`` logical CPUs. Thread and spinning advice measured with more
    than 0.25 core busy says so."""
    feeds: str = ""
    """The inputs every candidate was timed with (names, dtypes, shapes)."""
    synthetic: bool | None = None
    """True when ortlab synthesized the timing inputs."""
    eval_data: str = ""
    """The samples output accuracy (cosine) was measured on, with their shapes."""
    eval_synthetic: bool | None = None

    def to_pandas(self) -> Table:
        """One row per finding: rule, severity, title, evidence, fix, gain, ratio, ratio_low,
        ratio_high, saved_ms, code."""
        import pandas as pd

        cols = [
            "rule",
            "severity",
            "title",
            "evidence",
            "fix",
            "gain",
            "ratio",
            "ratio_low",
            "ratio_high",
            "saved_ms",
            "code",
        ]
        rows = [
            [
                f.rule,
                f.severity,
                f.title,
                f.evidence,
                f.fix,
                f.gain,
                f.ratio,
                f.low,
                f.high,
                f.saved_ms,
                f.code,
            ]
            for f in self.findings
        ]
        return pd.DataFrame(rows, columns=cols)

    def candidates(self) -> Table:
        """Every measured candidate: key, label, variant, stage, p50_ms, ratio, ratio_low,
        ratio_high, verdict, cosine, file_mb, pareto."""
        import pandas as pd

        front = {m.key for m in self.pareto_set()}
        return pd.DataFrame(
            [
                {
                    "key": m.key,
                    "label": m.label,
                    "variant": m.variant,
                    "stage": m.stage,
                    "p50_ms": m.p50_ms,
                    **spread(m.paired),
                    "cosine": m.cosine,
                    "file_mb": m.file_bytes / 1e6,
                    "pareto": m.key in front,
                }
                for m in self.measured
            ],
            columns=list(_CANDIDATE_COLUMNS),  # a doctor that measured nothing: still a table
        )

    def pareto_set(self) -> list[Measured]:
        """Candidates no other candidate beats on latency, output error and size at once."""
        pts = [
            (m.paired.ratio, 1 - (1.0 if math.isnan(m.cosine) else m.cosine), m.file_bytes)
            for m in self.measured
        ]
        out = []
        for i, p in enumerate(pts):
            dominated = any(
                all(q[d] <= p[d] for d in range(3)) and any(q[d] < p[d] for d in range(3))
                for j, q in enumerate(pts)
                if j != i
            )
            if not dominated:
                out.append(self.measured[i])
        return out

    def generation_trials(self) -> Table:
        """For an LLM decoder, each candidate measured in generation: key, label,
        decode_tokens_per_s, decode ratio with its interval and verdict, ttft_ms with its
        ratio and verdict, tokens_kept of tokens, and a variant's KL divergence from the model
        (kld_mean, kld_p99, nats) and top-1 agreement (empty for other models)."""
        from ortlab.diagnosis.generationfacts import TRIAL_COLUMNS

        if self.generation is None:
            import pandas as pd

            return pd.DataFrame(columns=list(TRIAL_COLUMNS))
        return self.generation.table()

    def cpu_costs(self) -> pd.DataFrame:
        """What each candidate measured for CPU costs, beside the baseline: key, label,
        cpu_ms_per_run (every thread), wall_ms_per_run, cores_per_run (busy while running),
        idle_cores (in the 0.2 s after its runs), cpu_ratio to the baseline with its interval
        (cpu_low, cpu_high) and verdict."""
        import pandas as pd

        rows = [
            [
                r.key,
                r.label,
                r.cpu_ms,
                r.wall_ms,
                r.cores,
                r.idle_cores,
                r.paired.ratio,
                r.paired.low,
                r.paired.high,
                r.paired.verdict,
            ]
            for r in (self.cpu.rows.values() if self.cpu is not None else ())
        ]
        return pd.DataFrame(rows, columns=list(CPU_COLUMNS))

    def threads(self) -> Table:
        """The intra-op threads / spinning sweep as a curve: setting, p50_ms, ratio, CI."""
        t = self.candidates()
        keep = t["key"].map(lambda k: CandidateKey.parse(k).is_sweep) | (t["key"] == "baseline")
        return t[keep & (t["stage"] != "final")][
            ["key", "label", "p50_ms", "ratio", "ratio_low", "ratio_high", "verdict"]
        ]

    def __repr__(self) -> str:
        return (
            f"<DoctorResult {self.model!r}: {len(self.findings)} findings; best "
            f"{render(self.best, 'text')}; "
            f"{len(self.measured)} candidates in {self.elapsed_s:.0f} s>"
        )


_CANDIDATE_COLUMNS = (
    "key",
    "label",
    "variant",
    "stage",
    "p50_ms",
    *PAIRED_COLUMNS,
    "cosine",
    "file_mb",
    "pareto",
)


# ---------------------------------------------------------------------- machine load


class _Stages:
    """Seconds and other processes' CPU (cores) per doctor stage."""

    def __init__(self, t0: float) -> None:
        self.seconds: dict[str, float] = {}
        self.load: dict[str, float] = {}
        self._t, self._cpu = t0, self._sample()
        self.cpus = self._cpu.cpus if self._cpu is not None else 0

    @staticmethod
    def _sample() -> CpuSample | None:
        import psutil

        try:
            return cpu_sample()
        except psutil.Error:  # counters unreadable (a locked-down container): no load figure
            return None

    def done(self, name: str) -> None:
        now, cpu = time.perf_counter(), self._sample()
        self.seconds[name] = now - self._t
        if cpu is not None and self._cpu is not None and now - self._t >= MIN_LOAD_WINDOW_S:
            cores = other_cores(self._cpu, cpu)  # (a stage too short to tell has no figure)
            if not math.isnan(cores):
                self.load[name] = round(cores, 3)
        self._t, self._cpu = now, cpu


# ---------------------------------------------------------------------- the search


def doctor(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    providers: Sequence[str] | str | None = None,
    budget_s: float = 120.0,
    rounds: int = 8,
    min_cosine: float = 0.999,
    variants: Sequence[ModelLike] = (),
    quantize: bool = True,
    transformers: bool = True,
    memory: bool = True,
    eval_data: Any = None,
    dims: Mapping[str, int] | None = None,
    objective: str = "latency",
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> DoctorResult:
    """Diagnose ``model`` under ``config`` (``providers`` overrides its providers).

    Candidate fixes — optimization levels, intra-op threads and spinning, IO binding, the
    transformers optimizer, int8 variants (dynamic for MatMul-heavy, static QDQ for conv-heavy),
    the initializer-input fix, CPU-only when an accelerator leaves CPU islands, and any
    ``variants`` you pass — are timed interleaved with the baseline within ``budget_s``; the
    clearly slower are pruned after a short screen; the winners are combined and re-measured.
    ``best`` is the fastest candidate that is significantly faster than the baseline and keeps
    every output's cosine similarity ≥ ``min_cosine`` (the baseline itself if none is).

    ``rounds`` is the most interleaved rounds per stage (more: tighter intervals, longer runs;
    at least 6, the fewest a 95 % interval needs); ``budget_s`` is an upper bound — the doctor
    stops when its stages are done, and lowers runs, then rounds, to fit the budget; a stage
    left with fewer than 6 rounds gives "not enough rounds for a verdict" and a note says so.
    A candidate that fails (its variant, session or run) becomes a finding; the others go on.
    ``result.other_cpu`` records how busy the machine was during each stage.

    With ``memory`` (default) the session's resident memory is measured in fresh processes
    (``ortlab.footprint``), with the arena, the memory pattern and prepacking each switched
    off; a setting that lowers the peak by 5 % or more is timed like the other candidates and
    becomes the memory finding, with both its saving and its time cost.

    The CPU each run costs (every thread of the session) and the cores an idle session keeps
    busy (its pool spinning) are measured for the baseline and each thread and spinning
    candidate (``result.cpu_costs()``); a pool that spins while idle is a finding. With
    ``objective="cpu"`` every screened candidate's CPU is measured and ``best`` is the one
    that saves the most CPU per run beyond noise (its latency verdict said beside it).

    An LLM decoder is also generated with (``result.generation``). Unless ``dims`` or
    ``feeds`` give its step, the baseline's profiled generation comes first: its decode steps
    are ``result.profile`` and ``result.roofline``, and every candidate is timed at one decode
    step with their mean past length cached (``result.feeds`` says which)."""

    check_objective(objective)
    t0 = time.perf_counter()
    stages = _Stages(t0)
    cfg = as_config(config)
    if providers is not None:
        cfg = cfg.with_(providers=providers)
    run = edge(model, cfg.with_(fallback="allow"), feeds, dims=dims, progress=progress)
    run = run.with_(timeout=timeout)
    budget = Budget(budget_s, t0, timeout, max_rounds=max(int(rounds), MIN_ROUNDS))
    stages.done("prepare")
    first = budget.for_stage()  # its failure is the doctor's
    decoder = run.model.decoder is not None
    # a decoder's step the doctor chooses is its generation's mean decode step, profiled once
    # (an EP that compiles: its placement's own profile of the step; yours: dims, feeds)
    tried = decoder and feeds is None and dims is None and not compiling(cfg.providers, cfg.policy)
    base = baseline_generation(run, first) if tried else None
    generated = base if base is not None and base.profiled_steps > 1 else None  # decode profiled
    if generated is not None:
        run = generation_step(run, generated)
    facts = observe(run, first, min_cosine=min_cosine, generated=generated).folded()
    if rounds < MIN_ROUNDS:
        facts = facts.heard(
            Said(
                notes=(
                    f"rounds={rounds} raised to {MIN_ROUNDS}: a 95 % interval needs at least "
                    f"{MIN_ROUNDS} rounds",
                )
            )
        )
    stages.done("observe")
    generating = functools.partial(generation_stage, logical=stages.cpus or 1, base=base)
    plan: Plan = [
        *([("memory", search.memory)] if memory else []),
        # a decoder generates, unless its first generation failed already (a finding says why)
        *([("generation", generating)] if decoder and (base is not None or not tried) else []),
        (
            "build variants",
            functools.partial(
                search.candidates,
                user_variants=variants,
                quantize=quantize,
                transformers=transformers,
            ),
        ),
        ("screen", search.screen),
        ("CPU cost", functools.partial(search_cpu, objective=objective)),
        ("accuracy", functools.partial(search.accuracy, eval_data=eval_data)),
        *([("quantization fix", search.fix_quantization)] if quantize else []),
        ("combine", combine),
        ("explain", search.explain_slow),
    ]
    facts = run_plan(plan, (run, budget, facts), stages.done, progress)
    best = cheapest(run, facts) if objective == "cpu" else search.best(run, facts)
    if facts.generation is not None:  # one story: the search's best is generated with too
        facts = run_stage(
            functools.partial(_best_generated, best=best), run, budget, facts
        ).folded()
    facts = dataclasses.replace(facts, other_cpu=dict(stages.load), logical_cpus=stages.cpus)
    step = {k: run.inputs.dims[k].value for k in ROLES} if generated is not None else {}
    return _result(run, budget, facts, stages, best, objective=objective, step=step)


def _result(
    run: Run,
    budget: Budget,
    facts: Facts,
    stages: _Stages,
    best: Best,
    *,
    objective: str,
    step: dict[str, int],
) -> DoctorResult:
    env = environment()
    if stages.load:
        per_stage = ", ".join(f"{k} {v:.2f}" for k, v in stages.load.items())
        env["other processes' CPU"] = f"{per_stage} cores of {stages.cpus} logical CPUs"
    caveat = load_caveat(facts)
    busy = busy_cores(facts)
    notes = list(facts.said.notes)
    if caveat and busy is not None:
        notes.append(
            f"other processes used {busy:.1f} of {stages.cpus} cores while the candidates were "
            "timed: the timings, thread and spinning advice above all, describe a busy machine; "
            "re-run the doctor idle to confirm them"
        )
    best, dropped = loaded_only(best, facts.seen.report.active)
    if dropped:  # never a verified configuration with an EP nothing was measured on
        notes.append(dropped)
    if budget.left_out(facts.said):  # what the budget left out, said once, last
        notes.append(budget.left_out(facts.said))
    samples, cfg = facts.samples, run.config
    return DoctorResult(
        model=run.model.name,
        model_path=str(run.model.path),
        requested=cfg.with_(fallback="warn"),
        findings=run_rules(facts),
        measured=list(facts.measured.values()),
        best=_in_generation(_with_caveat(best, cfg, caveat), facts.generation),
        baseline_ms=facts.baseline_ms,
        rounds=facts.rounds,
        runs=facts.runs,
        budget_s=budget.budget_s,
        elapsed_s=time.perf_counter() - budget.t0,
        environment=env,
        profile=facts.profile,
        placement=facts.seen.placement,
        whatif=facts.seen.predicted_fixed or facts.seen.predicted,
        memory=facts.footprint,
        soak=facts.soak,
        roofline=facts.seen.roofline,
        step=step,
        generation=facts.generation,
        cpu=facts.cpu,
        objective=objective,
        notes=notes,
        stages=stages.seconds,
        other_cpu=stages.load,
        feeds=run.inputs.describe(),
        synthetic=run.inputs.synthetic,
        eval_data=samples.source if samples is not None else "",
        eval_synthetic=samples.synthetic if samples is not None else None,
    )


_THREAD_FIELDS = ("intra_op_threads", "inter_op_threads", "allow_spinning", "execution_mode")


def _best_generated(run: Run, budget: StageBudget, facts: Facts, *, best: Best) -> Outcome:
    """The search's best, when it is not the baseline, generated against the baseline (the
    generation facts with its trial)."""
    generation = facts.generation
    if generation is None or best.key in ("", "baseline"):
        return outcome(budget, facts)
    if best.variant == "original" and best.config == run.config:
        return outcome(budget, facts)
    model = run.model if best.variant == "original" else load(best.model_path, name=best.variant)
    label = f"{best.variant} · {best.config.label()}"
    made = best_in_generation(run, budget, generation, (model, best.config, label))
    return outcome(budget, dataclasses.replace(facts, generation=made))


def _in_generation(best: Best, generation: GenerationFacts | None) -> Best:
    """A decoder's best is verified on one decode step and then generated with (the trial
    keyed ``best``): its verdict is the generation's, the one step's ratio said after it as
    evidence, each measurement named."""
    mine = [t for t in generation.trials if t.key == "best"] if generation else []
    return dataclasses.replace(best, generation=mine[0].decode) if mine else best


def _with_caveat(best: Best, requested: SessionConfig, caveat: str) -> Best:
    """The best's verdict (and so its snippet) says it was measured under load when it changes
    threads or spinning."""
    if caveat and any(getattr(best.config, k) != getattr(requested, k) for k in _THREAD_FIELDS):
        return dataclasses.replace(best, caveat=caveat)
    return best
