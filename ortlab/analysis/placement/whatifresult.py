"""The what-if result: each target's predicted placement (a :class:`PlacementResult` per
target), what the prediction rests on, and the reasons nodes fall back; the constants that
name the targets and QNN's default chip. ``ortlab.whatif`` (:mod:`ortlab.analysis.placement.whatif`)
measures it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ortlab.analysis.placement.reasons import group_reasons
from ortlab.analysis.placement.result import PlacementResult
from ortlab.core.errors import OrtlabError
from ortlab.core.result import Result, Table, table

__all__ = ["TargetInfo", "WhatIfError", "WhatIfResult", "WhatIfRow"]

CPU = "CPUExecutionProvider"
TARGETS: dict[str, str] = {
    "qnn": "QNNExecutionProvider",
    "nnapi": "NnapiExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
}
DEFAULT_TARGETS = ("qnn", "nnapi", "coreml", "openvino")
DEFAULT_QNN_OPTIONS = {"htp_arch": "73", "soc_model": "60"}
"""The chip QNN compiles for unless told otherwise: a v73 HTP in a Snapdragon 8 Gen 2
(soc_model 60), a common phone NPU. Without a named chip QNN's own compile fails on most float
models here (QNN_COMMON_ERROR_MEM_ALLOC); with it they compile and equal ORT's assignment."""
QNN_CHIP = "Snapdragon 8 Gen 2, HTP v73"


def qnn_options_text(options: Mapping[str, object]) -> str:
    """``htp_arch=73, soc_model=60 (Snapdragon 8 Gen 2, HTP v73: ortlab's default)``."""
    text = ", ".join(f"{k}={v}" for k, v in sorted(options.items())) or "QNN's own defaults"
    default = all(options.get(k) == v for k, v in DEFAULT_QNN_OPTIONS.items())
    return text + (f" ({QNN_CHIP}: ortlab's default)" if default else "")


PREDICTED = "predicted: no time"


class WhatIfError(OrtlabError, KeyError):
    """A target has no prediction (unknown evidence or a failed compile), or was not asked."""

    def __str__(self) -> str:  # KeyError quotes its message; say it plainly
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class WhatIfRow:
    node: str
    op_type: str
    target: str
    provider: str
    """Predicted EP: the target's EP, CPUExecutionProvider, or '' when ORT removes the node
    before partitioning (constant folded / fused) or nothing can be predicted."""
    partition: int
    evidence: str
    reason: str
    """Why the node is not on the target, in the EP's (or checker's) words; '' when it is."""
    category: str = ""
    """``reason`` normalised: dynamic shape, op not supported: X, data type, rank…"""


@dataclass(frozen=True)
class TargetInfo:
    target: str
    ep: str
    evidence: str
    reason: str = ""
    """Target-level: why there is no prediction (unknown/failed), else ''."""
    seconds: float = 0.0
    """Time this target took in the worker, all of it (QNN's includes starting the fresh
    process it compiles in; the checkers' include ORT's level-1 optimization)."""
    level1_on_target: int = -1
    """Nodes on the target in the graph ORT partitions (level-1 optimized, before mapping back
    to original nodes): ORT's assignment API for compiled/measured, the checker's own count
    for rules; -1 when there is no prediction."""
    partitions: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    """Evidence-specific figures: the checker's own counts, the plugin version…"""


@dataclass(frozen=True)
class WhatIfResult(Result):
    """Predicted placement per target (``nodes``, ``reasons()``, ``summary()``);
    ``w["qnn"]`` is that target's :class:`PlacementResult` for ``ortlab.graph(m, placement=…)``.
    Plots: ``plot()`` — nodes on target vs CPU per target."""

    model: str
    targets: list[TargetInfo]
    rows: list[WhatIfRow]
    placements: dict[str, PlacementResult]
    feeds: str
    """The shapes the prediction was made at ("the model's own shapes" when nothing was fixed)."""
    dims: dict[str, int] | None = None
    dynamic: list[str] = field(default_factory=list)
    """Inputs with dynamic dims in the model (``name[dims]``): fix them for NPUs."""
    before: dict[str, int] = field(default_factory=dict)
    """With dims/feeds on a dynamic model: nodes on each target *before* fixing the shapes."""
    fixed: bool = False
    """True when the inputs were fixed to ``feeds``' shapes (dims= or feeds= given)."""
    notes: list[str] = field(default_factory=list)
    level: str = "basic"
    """The optimization level the predicted sessions were built at (``whatif``'s config;
    basic without one: the graph ORT's partitioner is handed)."""

    def __getitem__(self, target: str) -> PlacementResult:
        key = target.lower()
        if key in self.placements:
            return self.placements[key]
        info = next((t for t in self.targets if t.target == key), None)
        if info is None:
            raise WhatIfError(
                f"{target!r} was not a target of this what-if "
                f"({', '.join(t.target for t in self.targets)})"
            )
        raise WhatIfError(f"No predicted placement for {target!r} ({info.evidence}): {info.reason}")

    @table
    def nodes(self) -> Table:
        """One row per ORIGINAL node (subgraph bodies included) and target: node, op_type,
        target, provider (predicted), partition, evidence (compiled / rules / measured /
        unknown / failed), reason ('' when the node is on the target), category (the reason
        normalised)."""
        import pandas as pd

        cols = [f.name for f in dataclasses.fields(WhatIfRow)]
        return pd.DataFrame([dataclasses.asdict(r) for r in self.rows], columns=cols)

    def to_pandas(self) -> Table:
        """The per-node table (:attr:`nodes`): node, op_type, target, provider, partition,
        evidence, reason, category."""
        return self.nodes

    def summary(self) -> Table:
        """Per target: ep, evidence, on_target / on_cpu / removed (original nodes),
        partitions, level1_on_target (ORT's or the checker's own count, in the graph ORT
        partitions), before (on target
        before fixing shapes, -1 if not run), seconds, reason."""
        import pandas as pd

        rows = []
        for t in self.targets:
            mine = [r for r in self.rows if r.target == t.target]
            rows.append(
                {
                    "target": t.target,
                    "ep": t.ep,
                    "evidence": t.evidence,
                    "on_target": sum(r.provider == t.ep for r in mine),
                    "on_cpu": sum(r.provider == CPU for r in mine),
                    "removed": sum(r.provider == "" for r in mine)
                    if t.evidence in ("compiled", "measured", "rules")
                    else 0,
                    "partitions": t.partitions,
                    "level1_on_target": t.level1_on_target,
                    "before": self.before.get(t.target, -1),
                    "seconds": t.seconds,
                    "reason": t.reason,
                }
            )
        return pd.DataFrame(rows)

    def reasons(self) -> Table:
        """Why nodes fall back, grouped per target and normalised reason: target, reason,
        nodes, examples (up to 3 node names), fix, raw (the most common text as the EP or
        checker said it)."""
        import pandas as pd

        ep = {t.target: t.ep for t in self.targets}
        out = []
        for t in self.targets:
            mine = [(r.node, r.reason, r.category) for r in self.rows if r.target == t.target]
            fixed = self.fixed or not self.dynamic
            out += [
                {"target": t.target, **g}
                for g in group_reasons(mine, ep[t.target], self.dynamic, fixed=fixed)
            ]
        return pd.DataFrame(out, columns=["target", "reason", "nodes", "examples", "fix", "raw"])

    def compare(self, other: WhatIfResult) -> Table:
        """Nodes on each target here vs in ``other`` (e.g. without vs with ``dims``)."""
        import pandas as pd

        a, b = self.summary().set_index("target"), other.summary().set_index("target")
        rows = [
            {
                "target": t,
                "evidence": a.at[t, "evidence"],
                "on_target": int(a.at[t, "on_target"]),
                "other_on_target": int(b.at[t, "on_target"]),
                "change": int(b.at[t, "on_target"]) - int(a.at[t, "on_target"]),
            }
            for t in a.index
            if t in b.index
        ]
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        parts = []
        for t in self.summary().itertuples():
            total = t.on_target + t.on_cpu + t.removed
            parts.append(
                f"{t.target} {t.on_target}/{total} ({t.evidence})"
                if t.evidence in ("compiled", "rules", "measured")
                else f"{t.target} {t.evidence}"
            )
        return f"<WhatIfResult {self.model!r}: {'; '.join(parts)}>"


# ---------------------------------------------------------------------- the join
