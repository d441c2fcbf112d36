"""What a session costs in memory, and which memory setting lowers it — measured.

ORT's profile shows its own allocator (``ProfileResult.memory()``: arena held, bytes in use).
The operating system's view is the other half: the resident memory a session adds — weights,
prepacked copies, the arena and what it keeps between runs. :func:`footprint` builds each
setting in a fresh process (``repeats`` times, round-robin), notes the resident set after the
session's runs (held) and its high-water mark (peak), and gives each setting's change against
the configured session with a distribution-free interval (Hodges-Lehmann / exact Mann-Whitney
over the fresh processes; 4 repeats give a 97 % interval, fewer give none).

The settings tried by default are the ones ORT documents for memory: the CPU arena
(``enable_cpu_mem_arena``), the memory pattern (``enable_mem_pattern``, one block planned for a
run's activations), and weight prepacking (``session.disable_prepacking``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.core.stats import shift_interval
from ortlab.core.units import fmt_bytes
from ortlab.engine import tasks_memory
from ortlab.engine.calls import Reach, Via, edge
from ortlab.engine.calls import run as run_task

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["FootprintResult", "FootprintRow", "footprint", "footprint_run", "memory_settings"]

PREPACKING = "session.disable_prepacking"


FORK_OFFSET_MB = 0.35
"""What a forked measuring process counts beyond a fresh interpreter (its parent's code pages
faulted in again): 0.33-0.40 MB of file pages on mlp, bert_tiny and resnet50, with the
anonymous memory equal to the byte on mlp and bert_tiny (``benchmarks/footprint_processes.py``;
the footprint states it)."""


def memory_settings(cfg: SessionConfig) -> dict[str, SessionConfig]:
    """The memory settings that differ from ``cfg``, each alone: label -> config."""
    out: dict[str, SessionConfig] = {}
    if cfg.enable_cpu_mem_arena:
        out["arena off"] = cfg.with_(enable_cpu_mem_arena=False)
    if cfg.enable_mem_pattern:
        out["memory pattern off"] = cfg.with_(enable_mem_pattern=False)
    if dict(cfg.config_entries).get(PREPACKING) != "1":
        out["prepacking off"] = cfg.with_(
            config_entries={**dict(cfg.config_entries), PREPACKING: "1"}
        )
    return out


@dataclass(frozen=True)
class FootprintRow:
    setting: str
    """'as configured' (the reference) or the setting changed."""
    config: SessionConfig
    held_bytes: list[float]
    """Resident memory the session added, after its runs: one value per fresh process."""
    peak_bytes: list[float]
    """High-water mark of resident memory from session creation to the last run."""
    create_ms: list[float]
    error: str = ""
    """Why it could not be measured ('' when it was)."""
    peak_change: float = math.nan
    """Median shift of the peak against the reference (bytes, < 0 saves); NaN for the reference."""
    peak_low: float = math.nan
    peak_high: float = math.nan
    held_change: float = math.nan
    held_low: float = math.nan
    held_high: float = math.nan
    confidence: float = math.nan
    """The intervals' coverage (NaN: too few repeats for 95 %)."""

    @property
    def peak(self) -> float:
        return float(np.median(self.peak_bytes)) if self.peak_bytes else math.nan

    @property
    def held(self) -> float:
        return float(np.median(self.held_bytes)) if self.held_bytes else math.nan

    @property
    def saves_peak(self) -> bool:
        """The whole interval of the peak's change is below zero."""
        return self.peak_high < 0

    @property
    def saves_held(self) -> bool:
        return self.held_high < 0

    def verdict(self) -> str:
        if self.error:
            return f"not measured: {self.error}"
        if math.isnan(self.peak_change):
            return "the reference"
        if math.isnan(self.confidence):
            return "too few repeats for an interval"
        parts = []
        for what, d, lo, hi in (
            ("peak", self.peak_change, self.peak_low, self.peak_high),
            ("held", self.held_change, self.held_low, self.held_high),
        ):
            if hi < 0 or lo > 0:
                word = "saves" if hi < 0 else "adds"
                parts.append(f"{what} {word} {fmt_bytes(abs(d))} [{_signed(lo)}, {_signed(hi)}]")
            else:
                parts.append(f"{what}: no measurable difference")
        return "; ".join(parts) + f" ({self.confidence:.0%} interval)"


def _signed(b: float) -> str:
    return ("-" if b < 0 else "+") + fmt_bytes(abs(b))


@dataclass(frozen=True)
class FootprintResult(Result):
    """``table`` / ``to_pandas()``: one row per setting, the reference first."""

    model: str
    weights_bytes: int
    """The model's initializers (what any session must hold at least once)."""
    rows: list[FootprintRow]
    repeats: int
    runs: int
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)

    @table
    def table(self) -> Table:
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "setting": r.setting,
                    "peak_bytes": r.peak,
                    "held_bytes": r.held,
                    "create_ms": float(np.median(r.create_ms)) if r.create_ms else math.nan,
                    "peak_change": r.peak_change,
                    "peak_low": r.peak_low,
                    "peak_high": r.peak_high,
                    "held_change": r.held_change,
                    "held_low": r.held_low,
                    "held_high": r.held_high,
                    "confidence": r.confidence,
                    "verdict": r.verdict(),
                }
                for r in self.rows
            ]
        )

    def to_pandas(self) -> Table:
        """setting, peak_bytes, held_bytes (medians over fresh processes), create_ms,
        peak/held change against the reference with its interval, confidence, verdict."""
        return self.table

    @property
    def reference(self) -> FootprintRow:
        return self.rows[0]

    def savings(self, min_share: float = 0.05, min_bytes: float = 1e6) -> list[FootprintRow]:
        """Settings that lower the peak measurably and by enough to matter (at least
        ``min_share`` of the reference's peak and ``min_bytes``), largest saving first."""
        floor = max(min_share * self.reference.peak, min_bytes)
        rows = [r for r in self.rows[1:] if r.saves_peak and -r.peak_change >= floor]
        return sorted(rows, key=lambda r: r.peak_change)

    def best(self) -> FootprintRow | None:
        """The setting that lowers the peak most, measurably; None when none does."""
        saving = self.savings(min_share=0.0, min_bytes=0.0)
        return saving[0] if saving else None

    def __repr__(self) -> str:
        ref = self.reference
        best = self.best()
        tail = (
            f"; {best.setting}: {best.verdict()}"
            if best
            else "; no setting lowers the peak"
            if len(self.rows) > 1
            else ""
        )
        return (
            f"<FootprintResult {self.model!r}: the session adds {fmt_bytes(ref.peak)} at "
            f"peak for {fmt_bytes(self.weights_bytes)} of weights{tail}>"
        )


def footprint(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    settings: Mapping[str, SessionConfig] | None = None,
    repeats: int = 4,
    runs: int = 3,
    **reach: Unpack[Reach],
) -> FootprintResult:
    """The resident memory a session of ``model`` adds (held after ``runs`` runs, and at its
    peak), for ``config`` and for each of ``settings`` (default: arena off, memory pattern
    off, prepacking off — see :func:`memory_settings`), each in ``repeats`` fresh processes.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    return footprint_run(edge(model, config, feeds, runs=runs, **reach), settings, repeats)


def footprint_run(
    run: Run, settings: Mapping[str, SessionConfig] | None = None, repeats: int = 4
) -> FootprintResult:
    """:func:`footprint`'s body, for a :class:`Run` resolved already (its ``runs`` per
    measurement)."""
    m, cfg, f, runs = run.model, run.config, run.inputs, run.runs
    chosen = dict(settings) if settings is not None else memory_settings(cfg)
    labels = ["as configured", *chosen]
    configs = [cfg, *chosen.values()]
    measured = run_task(
        tasks_memory.footprint,
        Via(
            desc=f"memory {m.name}",
            context=f"of {m.name!r}",
            progress=run.progress,
            timeout=run.timeout,
        ),
        items=[(str(m.path), m.name, c) for c in configs],
        feeds=dict(f),
        repeats=int(repeats),
        runs=int(runs),
    )
    rows, notes = [], []
    for label, c, got in zip(labels, configs, measured, strict=True):
        errors = [g.error for g in got if g.error]
        ok = [g for g in got if not g.error and g.held_bytes is not None]
        rows.append(
            FootprintRow(
                setting=label,
                config=c,
                held_bytes=[float(g.held_bytes) for g in ok if g.held_bytes is not None],
                peak_bytes=[float(g.peak_bytes) for g in ok if g.peak_bytes is not None],
                create_ms=[float(g.create_ms) for g in ok],
                error=errors[0] if errors and not ok else "",
            )
        )
    if not rows[0].held_bytes:
        why = rows[0].error or "this system does not report resident memory (/proc/self/status)"
        notes.append(f"the reference could not be measured: {why}")
    else:
        rows = [rows[0], *(_against(rows[0], r) for r in rows[1:])]
    if rows[0].held_bytes and not rows[0].peak_bytes:
        notes.append("peaks not measured: this kernel cannot reset the high-water mark")
    notes.append(
        f"each setting in {repeats} fresh processes, round-robin (each repeat forks them from "
        "a process started for it after its imports); the intervals are "
        "Hodges–Lehmann shifts with exact Mann–Whitney coverage"
    )
    files = [g.file_bytes for g in measured[0] if not g.error and g.file_bytes is not None]
    if files:
        notes.append(
            f"of what is held, {fmt_bytes(float(np.median(files)))} are file pages (median, "
            "as configured: the libraries' code the build and the runs used, and weights "
            "mapped from a file); a process forked for the measurement, as ortlab's are, "
            f"counts about {FORK_OFFSET_MB} MB more of them than a fresh interpreter would "
            "(code pages its parent had resident, faulted in again: "
            "benchmarks/footprint_processes.py), the same in every setting"
        )
    return FootprintResult(
        model=m.name,
        weights_bytes=int(m.summary.initializer_bytes),
        rows=rows,
        repeats=int(repeats),
        runs=int(runs),
        feeds=f.describe(),
        synthetic=f.synthetic,
        notes=notes,
    )


def _against(ref: FootprintRow, r: FootprintRow) -> FootprintRow:
    import dataclasses

    if not r.held_bytes:
        return r
    hd, hl, hh, conf = shift_interval(ref.held_bytes, r.held_bytes)
    pd_, pl, ph = (
        shift_interval(ref.peak_bytes, r.peak_bytes)[:3]
        if ref.peak_bytes and r.peak_bytes
        else (math.nan,) * 3
    )
    return dataclasses.replace(
        r,
        held_change=hd,
        held_low=hl,
        held_high=hh,
        peak_change=pd_,
        peak_low=pl,
        peak_high=ph,
        confidence=conf,
    )
