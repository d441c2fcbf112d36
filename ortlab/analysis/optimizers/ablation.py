"""One optimizer at a time: each graph transformer that fired, switched off in turn.

For every transformer ORT applied at ``level`` (from its INFO log), the model is optimized
again without it (``SessionConfig.disabled_optimizers``), and compared with the session that
has it: final-graph nodes, session-creation time, latency (paired, interleaved rounds, with an
interval) and output difference on the same inputs. A transformer whose absence changes
nothing measurable says so; one whose absence changes the outputs is a numerics suspect
(microsoft/onnxruntime #32132, #19902).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.analysis.quantization.metrics import output_errors
from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.errors import SessionConfigError
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.core.stats import MIN_ROUNDS, Paired, paired_columns
from ortlab.engine import tasks
from ortlab.engine.calls import (
    Reach,
    Via,
    check_report,
    edge,
    measure_interleaved,
)
from ortlab.engine.calls import run as run_task
from ortlab.engine.replies import SavedLevel

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["AblationResult", "AblationRow", "ablate_optimizers"]


@dataclass(frozen=True)
class AblationRow:
    off: str
    """The transformer switched off ('' for the baseline, which has them all)."""
    fired: int
    """How often it modified the graph in the baseline (ORT's INFO log)."""
    nodes: int
    """Final-graph nodes without it."""
    node_change: int
    """nodes minus the baseline's: > 0 means it fused or removed that many."""
    create_ms: float
    """Session creation (load, optimize, partition) without it; one build, not averaged."""
    own_ms: float
    """The transformer's own run time in the baseline's build (all its steps, from ORT's log
    timestamps; NaN when the log lacks them): what switching it off saves at start-up."""
    p50_ms: float
    paired: Paired
    """Latency without it / with it (median of per-round ratios; > 1: it speeds the model up)
    with its interval and verdict."""
    max_abs: float
    """Largest output difference from the baseline's outputs (0.0: bit-identical)."""
    cosine: float


@dataclass(frozen=True)
class AblationResult(Result):
    """``table`` / ``to_pandas()``: one row per transformer switched off, baseline first."""

    model: str
    config: SessionConfig
    level: str
    rows: list[AblationRow]
    rounds: int
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)

    @table
    def table(self) -> Table:
        import pandas as pd

        return pd.DataFrame([paired_columns(r) for r in self.rows])

    def to_pandas(self) -> Table:
        """off, fired, nodes, node_change, create_ms, own_ms, p50_ms, ratio, low, high, verdict,
        max_abs, cosine."""
        return self.table

    def __repr__(self) -> str:
        changed = [r.off for r in self.rows[1:] if r.max_abs > 0]
        return (
            f"<AblationResult {self.model!r} at {self.level}: {len(self.rows) - 1} transformers "
            f"switched off one at a time; outputs change without {changed or 'none of them'}>"
        )


def ablate_optimizers(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    level: str = "all",
    only: Sequence[str] | None = None,
    rounds: int = MIN_ROUNDS,
    runs: int = 10,
    **reach: Unpack[Reach],
) -> AblationResult:
    """Switch off each transformer that fired at ``level`` (or those in ``only``), one at a
    time: nodes, session-creation time, paired latency and output difference against the
    session with all of them.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    run = edge(model, config, feeds, runs=runs, **reach)
    run = run.with_(config=run.config.with_(level=level))
    with cache.temp_dir("ablation-") as folder:  # the graphs are counted, then deleted
        return _ablate(run, folder, level=level, only=only, rounds=rounds)


def _ablate(
    run: Run, folder: Path, *, level: str, only: Sequence[str] | None, rounds: int
) -> AblationResult:
    m, cfg, f = run.model, run.config, run.inputs
    progress, timeout = run.progress, run.timeout

    def optimized(c: SessionConfig, tag: str) -> SavedLevel:
        return run_task(
            tasks.optimize_levels,
            Via(
                desc=f"optimize {m.name} {tag}",
                context=f"of {m.name!r} with {c.label()}",
                progress=False,
                timeout=timeout,
            ),
            model_path=str(m.path),
            model_name=m.name,
            config=c,
            levels=[c.level],
            folder=str(folder / tag),
        )[c.level]

    (folder / "base").mkdir(exist_ok=True)
    base = optimized(cfg, "base")
    check_report(base.report, cfg, m)
    fired: dict[str, int] = dict(base.report.fired)
    names = list(only) if only is not None else sorted(fired)
    unknown = [n for n in names if n not in base.report.transformers]
    if unknown:
        raise SessionConfigError(
            f"ORT runs no transformer named {unknown} at level {level!r}; it runs "
            f"{', '.join(base.report.transformers[:40])}."
        )
    offs = [cfg.with_(disabled_optimizers=[*cfg.disabled_optimizers, n]) for n in names]
    built = []
    for k, c in enumerate(offs):
        (folder / f"off{k}").mkdir(exist_ok=True)
        built.append(optimized(c, f"off{k}"))
        if callable(progress):
            progress(k + 1, len(names) + 2)
    configs = [cfg, *offs]
    timed = measure_interleaved(
        [(m, c) for c in configs],
        run,
        rounds=rounds,
        desc=f"ablation {m.name}",
        context=f"of {m.name!r}",
    )
    labels = [f"with all at {level}", *(f"without {n}" for n in names)]
    ms = timed.medians_ms
    verdicts = timed.verdicts(labels)
    outs = [
        run_task(
            tasks.outputs_many,
            Via(desc="outputs", context=f"of {m.name!r}", progress=False, timeout=timeout),
            model_path=str(m.path),
            model_name=m.name,
            config=c,
            samples=[dict(f)],
            seeded=bool(m.random_ops),
        )[0]
        for c in configs
    ]
    base_nodes = len(base.final)
    rows = []
    for k, (name, saved) in enumerate(zip(["", *names], [base, *built], strict=True)):
        v, text = verdicts[k]
        err = _worst([outs[0]], [outs[k]])
        rows.append(
            AblationRow(
                off=name,
                fired=fired.get(name, 0),
                nodes=len(saved.final),
                node_change=len(saved.final) - base_nodes,
                create_ms=float(saved.report.create_ms),
                own_ms=float(base.report.transformer_ms.get(name, math.nan)) if name else math.nan,
                p50_ms=float(np.median(ms[:, k])),
                paired=Paired.of(v, text),
                max_abs=float(err["max_abs"]),
                cosine=float(err["cosine"]),
            )
        )
    return AblationResult(
        model=m.name,
        config=cfg,
        level=level,
        rows=rows,
        rounds=rounds,
        feeds=f.describe(),
        synthetic=f.synthetic,
        notes=[
            "ratio > 1: the model is slower without that transformer, so it helps; "
            "create_ms is one session build each (not averaged); its own ms is the "
            "transformer's run in the baseline's build, from ORT's log timestamps."
        ],
    )


def _worst(
    refs: Sequence[Mapping[str, object]], tests: Sequence[Mapping[str, object]]
) -> dict[str, float]:
    """The largest max_abs and the lowest cosine over the float outputs (NaN without any)."""
    errors, _ = output_errors(refs, tests)
    floats = [e for e in errors.values() if e["kind"] == "float"]
    if not floats:
        return {"max_abs": math.nan, "cosine": math.nan}
    return {
        "max_abs": max(float(e["max_abs"]) for e in floats),
        "cosine": min(float(e["cosine"]) for e in floats),
    }
