"""What ORT's graph optimizer does to a model, level by level, and what it is worth.

Per level: ORT's optimized model (saved to ortlab's cache, never next to the user's file), node
count, op-type histogram, the graph transformers that fired (ORT's INFO log), and the many-to-
many mapping optimized <-> original nodes (:mod:`ortlab.analysis.graph.mapping`). Latency per level
is measured interleaved in one worker (A B C D, D C B A, …) and compared with ``disabled`` as a
paired ratio with a bootstrap interval."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.analysis.graph.mapping import Group, OpNode, graph_nodes, map_nodes
from ortlab.core import cache
from ortlab.core.config import LEVELS, SessionConfig, canonical_level
from ortlab.core.eps import COMPILING_EPS
from ortlab.core.errors import SessionConfigError
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.stats import Paired, against_first, paired_columns
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
    from pathlib import Path

    import onnx

    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike
    from ortlab.core.model import Model

__all__ = ["LevelResult", "OptimizationResult", "initializer_input_blocker", "optimization_diff"]


@dataclass(frozen=True)
class LevelResult:
    level: str
    path: str
    """ORT's optimized model for this level (in ortlab's cache; weights in a side file)."""
    nodes: int
    op_types: dict[str, int]
    fired: dict[str, int]
    """Graph transformers that modified the graph, with how often (ORT's INFO log)."""
    groups: list[Group]
    status: dict[str, str]
    """Per original node: kept / rewritten / fused / folded / eliminated."""
    unaccounted: list[str]
    log: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LatencyRow:
    level: str
    p50_ms: float
    """Median over rounds of each round's median latency."""
    paired: Paired
    """Paired ratio level / baseline (per-round ratios, median; < 1 is faster) with its
    interval and verdict."""


@dataclass(frozen=True)
class OptimizationResult(Result):
    model: str
    config: SessionConfig
    original_nodes: int
    original_op_types: dict[str, int]
    original_ops: dict[str, str]
    """op_type of every original node, by name."""
    levels: list[LevelResult]
    latency_rows: list[LatencyRow]
    rounds_ms: list[list[float]]
    """Per round, per level (in ``levels`` order): median latency in ms."""
    blockers: list[str] = field(default_factory=list)
    other_cores: float | None = None
    """Cores other processes used while the levels were timed (None: not measured)."""
    """Known reasons ORT cannot optimize this model, each with the fix."""
    feeds: str = ""
    """The inputs the figures come from: names, dtypes, shapes (and how dims were chosen)."""
    synthetic: bool | None = None
    """True when ortlab synthesized those inputs (seeded random values); None if unknown."""

    def level(self, level: str) -> LevelResult:
        """The measured level named ``level`` (any of its aliases); KeyError if it was not
        measured."""
        key = canonical_level(level)
        for lv in self.levels:
            if lv.level == key:
                return lv
        raise KeyError(f"Level {level!r} was not measured; have {[x.level for x in self.levels]}")

    @table
    def counts(self) -> Table:
        """Rows: 'original' then each level; columns: nodes, then one per op type."""
        import pandas as pd

        rows = [{"level": "original", "nodes": self.original_nodes, **self.original_op_types}]
        rows += [{"level": lv.level, "nodes": lv.nodes, **lv.op_types} for lv in self.levels]
        return pd.DataFrame(rows).set_index("level").fillna(0).astype(int)

    def fusions(self, level: str) -> Table:
        """Each fused/rewritten node at ``level``: optimized, kind, op_types (its ops),
        original (the original nodes it replaced), n_original, original_ops."""
        import pandas as pd

        lv = self.level(level)
        opt_ops = _op_lookup(lv)
        rows = [
            {
                "optimized": ", ".join(g.optimized),
                "kind": g.kind,
                "op_types": "+".join(opt_ops.get(o, "?") for o in g.optimized),
                "original": g.original,
                "n_original": len(g.original),
                "original_ops": _ops_text(g.original, self.original_ops),
            }
            for g in lv.groups
            if g.kind in ("fused", "rewritten", "inserted")
        ]
        return pd.DataFrame(
            rows,
            columns=["optimized", "kind", "op_types", "original", "n_original", "original_ops"],
        )

    def fired(self, level: str) -> Table:
        """The graph transformers that modified the graph at ``level`` (transformer, times)."""
        import pandas as pd

        lv = self.level(level)
        return pd.DataFrame(list(lv.fired.items()), columns=["transformer", "times"])

    def mapping(self, level: str) -> Table:
        """Per original node: node, status, optimized (nodes it became part of at ``level``)."""
        import pandas as pd

        lv = self.level(level)
        owner: dict[str, list[str]] = {}
        for g in lv.groups:
            for o in g.original:
                owner.setdefault(o, []).extend(g.optimized)
        return pd.DataFrame(
            [{"node": n, "status": s, "optimized": owner.get(n, [])} for n, s in lv.status.items()]
        )

    @table
    def latency(self) -> Table:
        """Per level: p50_ms, ratio to the first level (paired, interleaved), its interval (low,
        high: coverage >= 95 %, NaN below 6 rounds), verdict."""
        import pandas as pd

        return pd.DataFrame([paired_columns(r) for r in self.latency_rows])

    def __repr__(self) -> str:
        counts = " → ".join(f"{lv.level} {lv.nodes}" for lv in self.levels)
        return f"<OptimizationResult {self.model!r}: {self.original_nodes} nodes; {counts}>"

    def to_pandas(self) -> Table:
        """Latency per level (:attr:`latency`): level, p50_ms, ratio, low, high, verdict."""
        return self.latency


def _op_lookup(lv: LevelResult) -> dict[str, str]:
    import onnx

    try:
        graph = onnx.load(lv.path, load_external_data=False).graph
    except (OSError, ValueError):  # the cached file was removed (ortlab cache clear)
        return {}
    return {n.name: n.op_type for n in graph_nodes(graph, subgraphs=True)}


def _ops_text(names: list[str], ops: dict[str, str]) -> str:
    counts = Counter(ops.get(n, "?") for n in names)
    return ", ".join(f"{op}×{c}" if c > 1 else op for op, c in counts.most_common())


def initializer_input_blocker(model: Model) -> str | None:
    """ORT treats initializers that are also graph inputs (IR >= 4) as overridable: it folds and
    fuses nothing that depends on them."""
    s = model.summary
    if s.ir_version >= 4 and s.initializers_as_inputs:
        return (
            f"{s.initializers_as_inputs} initializers are also listed as graph inputs (IR "
            f"{s.ir_version}): ORT treats them as inputs the caller may override, so it cannot "
            "constant-fold or fuse anything that uses them. Fix: remove them from graph.input "
            "(ortlab.without_initializer_inputs(model) writes such a copy), or re-export "
            "with keep_initializers_as_inputs=False."
        )
    return None


def optimization_diff(
    model: ModelLike,
    levels: Sequence[str] = tuple(LEVELS),
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    rounds: int = 8,
    runs: int = 10,
    measure: bool = True,
    disable: Sequence[str] = (),
    **reach: Unpack[Reach],
) -> OptimizationResult:
    """Optimize ``model`` at each level, map every node, and time the levels interleaved.

    ``disable``: graph transformers ORT must not apply at any level (``["QuickGeluFusion"]``;
    :func:`ortlab.ablate_optimizers` switches each one off in turn); a name ORT does not run
    is an error that lists the ones it does.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """

    run = edge(model, config, feeds, runs=runs, **reach)
    m, cfg, f = run.model, run.config, run.inputs
    if disable:
        cfg = cfg.with_(disabled_optimizers=[*cfg.disabled_optimizers, *disable])
    keys = [canonical_level(lv) for lv in levels]
    if cfg.providers != "auto" and any(p in COMPILING_EPS for p in cfg.providers):
        raise SessionConfigError(
            f"optimization_diff saves ORT's optimized model, which ORT cannot do when a compiling "
            f"EP ({', '.join(p for p in cfg.providers if p in COMPILING_EPS)}) is in the session. "
            "Use providers=['cpu'] (or CUDA) here; ortlab.placement() shows the compiled "
            "partitions."
        )
    # one folder per model and graph settings: a level is stored once, whatever the threads
    digest = hashlib.sha256(f"{m.fingerprint()}|{cfg.graph_key()}".encode()).hexdigest()[:16]
    folder = cache.subdir("optimized") / f"{m.name[:40]}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    context = f"of {m.name!r} with {cfg.label()}"
    saved = run_task(
        tasks.optimize_levels,
        Via(desc=f"optimize {m.name}", context=context, progress=run.progress, timeout=run.timeout),
        model_path=str(m.path),
        model_name=m.name,
        config=cfg,
        levels=keys,
        folder=str(folder),
    )
    graph = m.proto.graph
    original = m.nodes
    check_report(saved[keys[0]].report, cfg, m)  # a requested EP that did not load is said
    unknown = (
        _unknown_transformers(m, cfg, disable, keys[-1], folder=folder, timeout=run.timeout)
        if disable
        else None
    )
    if unknown:
        raise SessionConfigError(
            f"disable={unknown[0]}: ORT runs no transformer of that name at level {keys[-1]!r}; "
            f"it runs {', '.join(unknown[1])}."
        )
    level_results = [_level_result(level, saved[level], original, graph) for level in keys]
    latency_rows: list[LatencyRow] = []
    rounds_ms: list[list[float]] = []
    load: float | None = None
    if measure:
        timed = measure_interleaved(
            [(m, cfg.with_(level=k)) for k in keys],
            run,
            rounds=rounds,
            desc=f"levels {m.name}",
            context=context,
        )
        rounds_ms = timed.medians_ms.tolist()
        load = timed.other_cores
        latency_rows = _latency_rows(keys, timed.medians_ms, timed.failed)
    blocker = initializer_input_blocker(m)
    return OptimizationResult(
        model=m.name,
        config=cfg,
        original_nodes=len(original),
        original_op_types=dict(Counter(n.op_type for n in original).most_common()),
        original_ops={n.name: n.op_type for n in original},
        levels=level_results,
        latency_rows=latency_rows,
        rounds_ms=rounds_ms,
        blockers=[blocker] if blocker else [],
        other_cores=load,
        feeds=f.describe(),
        synthetic=f.synthetic,
    )


def _unknown_transformers(
    m: Model,
    cfg: SessionConfig,
    names: Sequence[str],
    level: str,
    *,
    folder: Path,
    timeout: float | None,
) -> tuple[list[str], list[str]] | None:
    """([names ORT does not run], [the ones it runs]) at ``level``, from a session without the
    disabled list (a disabled transformer does not run, so it is absent from its own log)."""
    plain = cfg.with_(disabled_optimizers=[], level=level)
    (folder / "plain").mkdir(exist_ok=True)
    saved = run_task(
        tasks.optimize_levels,
        Via(desc=f"optimize {m.name}", context=f"of {m.name!r}", progress=False, timeout=timeout),
        model_path=str(m.path),
        model_name=m.name,
        config=plain,
        levels=[level],
        folder=str(folder / "plain"),
    )
    ran = list(saved[level].report.transformers)
    missing = [n for n in names if n not in ran]
    return (missing, sorted(ran)) if missing else None


def _level_result(
    level: str, saved: SavedLevel, original: Sequence[OpNode], graph: onnx.GraphProto
) -> LevelResult:
    final = [OpNode(a, b, c, tuple(d), tuple(e), f) for a, b, c, d, e, f in saved.final]
    mapping = map_nodes(
        original, final, [t.name for t in graph.initializer], [i.name for i in graph.input]
    )
    ops = Counter(
        n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in final
    )
    report = saved.report
    return LevelResult(
        level=level,
        path=saved.path,
        nodes=len(final),
        op_types=dict(ops.most_common()),
        fired=report.fired,
        groups=mapping.groups,
        status=mapping.status,
        unaccounted=mapping.unaccounted,
        log=report.log,
    )


def _latency_rows(keys: list[str], ms: np.ndarray, failed: dict[int, str]) -> list[LatencyRow]:
    verdicts = against_first(ms, keys, failed)
    nan = float("nan")
    rows = []
    for k, level in enumerate(keys):
        if k in failed:
            rows.append(LatencyRow(level, nan, Paired.untimed(f"failed: {failed[k]}")))
            continue
        v, text = verdicts[k]
        rows.append(LatencyRow(level, float(np.median(ms[:, k])), Paired.of(v, text)))
    return rows
