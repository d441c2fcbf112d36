"""The doctor: find what slows a session down, and prove each fix by measuring it.

Pipeline: observe (profile, placement when an accelerator loaded, the session report, the
graph) → build candidate fixes (settings and model variants) → screen them interleaved with the
baseline in the worker, prune the clearly slower ones, measure the survivors more → combine the
winners and re-measure the combination against the baseline → rules (:mod:`ortlab.rules`) turn
the facts and measurements into findings. Every gain is a paired, interleaved verdict with a
95 % bootstrap interval; nothing is inferred from a checklist.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortlab._result import Result
from ortlab.config import SessionConfig
from ortlab.placement import PlacementResult
from ortlab.profiling import ProfileResult
from ortlab.rules import Finding, Measured, run_rules

__all__ = ["Best", "DoctorResult", "doctor"]


@dataclass(frozen=True)
class Best:
    """The best verified configuration: a SessionConfig plus the model file to load."""

    config: dict[str, Any]
    variant: str
    model_path: str
    steps: list[str]
    ratio: float
    low: float
    high: float
    verdict: str
    cosine: float

    @property
    def session_config(self) -> SessionConfig:
        return SessionConfig.from_json(self.config)

    def snippet(self) -> str:
        """Python that builds this session with plain onnxruntime."""
        head = [f"# ortlab doctor: best verified configuration ({self.verdict})"]
        if self.variant != "original":
            head.append(f"# model variant {self.variant!r}, made by: " + "; ".join(self.steps))
        return "\n".join(head) + "\n" + self.session_config.snippet(self.model_path)

    def __repr__(self) -> str:
        return f"<Best {self.variant} · {self.session_config.label()}: {self.verdict}>"


@dataclass(frozen=True)
class DoctorResult(Result):
    """Findings (most costly first), every measured candidate, the best and the Pareto set."""

    model: str
    model_path: str
    requested: dict[str, Any]
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
    notes: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)
    """Seconds spent per stage (observe, build variants, screen, accuracy, combine, explain)."""

    def to_pandas(self) -> Any:
        """One row per finding: rule, severity, title, evidence, fix, gain, ratio, ci_low,
        ci_high, saved_ms, code."""
        import pandas as pd

        cols = [
            "rule",
            "severity",
            "title",
            "evidence",
            "fix",
            "gain",
            "ratio",
            "ci_low",
            "ci_high",
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

    def candidates(self) -> Any:
        """Every measured candidate: key, label, variant, stage, p50_ms, ratio, ci_low,
        ci_high, verdict, cosine, file_mb, pareto."""
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
                    "ratio": m.ratio,
                    "ci_low": m.low,
                    "ci_high": m.high,
                    "verdict": m.verdict,
                    "cosine": m.cosine,
                    "file_mb": m.file_bytes / 1e6,
                    "pareto": m.key in front,
                }
                for m in self.measured
            ]
        )

    def pareto_set(self) -> list[Measured]:
        """Candidates no other candidate beats on latency, output error and size at once."""
        pts = [
            (m.ratio, 1 - (1.0 if math.isnan(m.cosine) else m.cosine), m.file_bytes)
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

    def threads(self) -> Any:
        """The intra-op threads / spinning sweep as a curve: setting, p50_ms, ratio, CI."""
        t = self.candidates()
        keep = t["key"].str.startswith(("threads:", "spin:")) | (t["key"] == "baseline")
        return t[keep & (t["stage"] != "final")][
            ["key", "label", "p50_ms", "ratio", "ci_low", "ci_high", "verdict"]
        ]

    def plot(self, kind: str = "candidates") -> Any:
        """'candidates' (time ratio with CI per candidate), 'threads' (the sweep curve) or
        'pareto' (latency vs output error, size as marker area)."""
        from ortlab import plots

        return plots.doctor_figure(self, kind)

    def __repr__(self) -> str:
        return (
            f"<DoctorResult {self.model!r}: {len(self.findings)} findings; best "
            f"{self.best.variant} · {self.best.session_config.label()} ({self.best.verdict}); "
            f"{len(self.measured)} candidates in {self.elapsed_s:.0f} s>"
        )

    def to_text(self) -> str:
        from ortlab.report import doctor_text

        return doctor_text(self)

    def _repr_html_(self) -> str:
        from ortlab.report import doctor_html

        return doctor_html(self)


# ---------------------------------------------------------------------- the search


def doctor(
    model: Any,
    config: SessionConfig | Mapping[str, Any] | None = None,
    feeds: Mapping[str, Any] | None = None,
    *,
    providers: Sequence[str] | str | None = None,
    budget_s: float = 120.0,
    rounds: int = 8,
    min_cosine: float = 0.999,
    variants: Sequence[Any] = (),
    quantize: bool = True,
    transformers: bool = True,
    eval_data: Any = None,
    dims: Mapping[str, int] | None = None,
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

    ``rounds`` is the most interleaved rounds per stage (more: tighter intervals, longer runs);
    ``budget_s`` is an upper bound — the doctor stops when its stages are done, and lowers runs
    and rounds (to a minimum of 4 rounds) to fit the budget."""
    from ortlab.engine import as_config, prepare
    from ortlab.search import Search

    t0 = time.perf_counter()
    cfg = as_config(config)
    if providers is not None:
        cfg = cfg.with_(providers=providers)
    m, cfg, f = prepare(model, cfg.with_(fallback="allow"), feeds, dims)
    search = Search(
        m,
        cfg=cfg,
        feeds=f,
        budget_s=budget_s,
        min_cosine=min_cosine,
        progress=progress,
        timeout=timeout,
        t0=t0,
        max_rounds=max(int(rounds), 4),
    )
    stages: dict[str, float] = {}

    def stage(name: str, start: float) -> float:
        now = time.perf_counter()
        stages[name] = now - start
        return now

    t = stage("prepare", t0)
    facts = search.observe()
    t = stage("observe", t)
    items = search.candidates(facts, variants, quantize=quantize, transformers=transformers)
    t = stage("build variants", t)
    search.screen(items, facts)
    t = stage("screen", t)
    search.accuracy(items, facts, eval_data)
    t = stage("accuracy", t)
    search.combine(items, facts)
    t = stage("combine", t)
    search.explain_slow(items, facts)
    stage("explain", t)
    best = search.best(facts)
    from ortlab.benchmark import environment

    return DoctorResult(
        model=m.name,
        model_path=str(m.path),
        requested=cfg.with_(fallback="warn").to_dict(),
        findings=run_rules(facts),
        measured=list(facts.measured.values()),
        best=best,
        baseline_ms=facts.baseline_ms,
        rounds=search.rounds,
        runs=search.runs,
        budget_s=budget_s,
        elapsed_s=time.perf_counter() - t0,
        environment=environment(),
        profile=search.profile,
        placement=facts.placement,
        notes=search.notes,
        stages=stages,
    )
