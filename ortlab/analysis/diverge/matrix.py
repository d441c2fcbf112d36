"""The EP x optimization-level grid of a divergence: each cell's final outputs against the
reference cell (the first EPs, level disabled: the least transformed), the sessions as they run
(nothing exposed), and which cells diverge — the method an ORT issue used by hand (only CPU
with every optimization on diverged: a fusion), made automatic."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortlab.core.config import SessionConfig
from ortlab.core.eps import label
from ortlab.engine import tasks_diverge
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task
from ortlab.engine.errorsums import Side

if TYPE_CHECKING:
    from ortlab.core.inputs import FeedsLike

__all__ = ["LEVELS", "MatrixCell", "grid", "matrix_verdict"]

LEVELS = ("disabled", "all")
"""The optimization levels of the grid: none, and every one."""


@dataclass(frozen=True)
class MatrixCell:
    """One cell: its EPs and level, its final outputs' worst cosine and largest absolute
    difference against the reference cell, and whether that passes the threshold."""

    providers: str
    level: str
    cosine: float
    max_abs: float
    diverges: bool


def _eps(cfg: SessionConfig) -> str:
    p = cfg.providers
    return p if isinstance(p, str) else ", ".join(label(x) for x in p)


def grid(
    model_paths: tuple[str, str],
    configs: Sequence[SessionConfig],
    finals: dict[str, str],
    feeds: FeedsLike,
    *,
    error: Callable[[float, float], float],
    threshold: float,
    timeout: float | None,
) -> list[MatrixCell]:
    """Every (EPs of ``configs``) x LEVELS cell of the other model (``model_paths[1]``) against
    the reference model under the first EPs at level disabled; ``error(cosine, max_abs)`` is
    the result's metric."""
    eps = list(dict.fromkeys(c.providers for c in configs))
    base = configs[0].with_(level=LEVELS[0])
    cells = []
    for p in eps:
        for level in LEVELS:
            cfg = configs[-1].with_(providers=p, level=level)
            got = run_task(
                tasks_diverge.diverge_errors,
                Via(
                    desc="diverge: grid", context=f"the cell {_eps(cfg)} · {level}", timeout=timeout
                ),
                reference=Side(model_paths[0], base, "the reference cell"),
                other=Side(model_paths[1], cfg, f"the cell {_eps(cfg)} · {level}"),
                pairs={},
                finals=finals,
                feeds=dict(feeds),
            )
            stats = list(got.finals.values())
            cos = min((s.cosine for s in stats if not math.isnan(s.cosine)), default=1.0)
            worst = max((s.max_abs for s in stats if not math.isnan(s.max_abs)), default=0.0)
            cells.append(MatrixCell(_eps(cfg), level, cos, worst, error(cos, worst) > threshold))
    return cells


def matrix_verdict(cells: Sequence[MatrixCell]) -> str:
    """Which cells diverge, in words: a level, an EP, one EP at one level, or all of them."""
    bad = [c for c in cells if c.diverges]
    levels = {c.level for c in bad}
    eps = {c.providers for c in bad}
    said = [
        (not bad, "no cell of the grid diverges from the reference cell"),
        (
            len(bad) == len(cells),
            "every cell diverges, the reference's EPs at level disabled too: the other model "
            "itself computes something else",
        ),
        (
            levels == {"all"} and all(c.diverges for c in cells if c.level == "all"),
            "only level all diverges, on every EP: a graph optimization (a fusion) brings it",
        ),
        (
            len(eps) == 1 and all(c.diverges for c in cells if c.providers in eps),
            f"only {next(iter(eps), '')} diverges, at every level: its kernels bring it",
        ),
        (
            len(bad) == 1,
            f"only {bad[0].providers} at level {bad[0].level} diverges: that EP's optimization "
            "of it"
            if bad
            else "",
        ),
    ]
    return next(
        (text for holds, text in said if holds),
        "these cells diverge: " + ", ".join(f"{c.providers} · {c.level}" for c in bad),
    )
