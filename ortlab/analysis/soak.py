"""``ortlab.soak``: does memory grow run after run? The session runs many times — with the same
inputs, with fresh values of the same shapes, with fresh shapes — in a process of its own per
setting, and after every run the resident set and the bytes ORT's arena extended by are noted
(:mod:`ortlab.engine._soak_child`). Growth per run is the Theil-Sen slope of the resident set
over the runs after the first tenth (the warm-up: first allocations, pre-packing), with Sen's
95 % interval; within :data:`FLAT_MB` per run either way it is flat. The settings that are
said to stop growth are measured side by side: the arena off, the arena shrunk after each run
(``memory.enable_memory_arena_shrinkage``), the arena extended by what is asked
(``kSameAsRequested``).

2026's memory complaints about onnxruntime are of this kind: ~11 MB per run on 1.24-1.26
(dmarzzz/VoxTerm#166), 3-4x the earlier peak with dynamic shapes (onnxruntime#29538).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

from ortlab.analysis.memory import memory_settings
from ortlab.core.config import SessionConfig
from ortlab.core.machine import BUSY_CORES
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.core.stats import theil_sen
from ortlab.core.units import fmt_bytes
from ortlab.engine import tasks_memory
from ortlab.engine.calls import Reach, Via, edge
from ortlab.engine.calls import run as run_task

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike
    from ortlab.core.model import ModelLike

__all__ = ["FLAT_MB", "PHASES", "SoakResult", "SoakSeries", "soak", "soak_run", "soak_settings"]

PHASES = ("same inputs", "fresh inputs", "fresh shapes")
"""What each run is fed: the same arrays; new arrays of the same shapes (their values
shuffled); new shapes (every free dim drawn anew each run between its value and twice it, the
largest first: a healthy allocator has then seen the most it needs before the fit begins, and
what grows after is memory not reused)."""
FLAT_MB = 0.05
"""A slope whose interval lies within this many MB per run either way is flat."""
MB = 1024**2
"""ortlab's MB, as fmt_bytes writes it (binary)."""
SHRINK = "arena shrinks after each run"
SAME_AS_REQUESTED = "arena grows by request (kSameAsRequested)"


def soak_settings(cfg: SessionConfig) -> list[tuple[str, SessionConfig, bool, bool]]:
    """(label, config, shrink after each run, extend by what is asked): as configured, and
    each setting said to stop growth where the arena is on."""
    out = [("as configured", cfg, False, False)]
    if cfg.enable_cpu_mem_arena:
        out += [
            ("arena off", memory_settings(cfg)["arena off"], False, False),
            (SHRINK, cfg, True, False),
            (SAME_AS_REQUESTED, cfg, False, True),
        ]
    return out


@dataclass(frozen=True)
class SoakSeries:
    """One setting's one phase: the resident set and the arena's extensions after each run."""

    setting: str
    phase: str
    rss: list[int]
    """Resident bytes of the session's process after each run."""
    arena: list[int]
    """Bytes ORT's arena had extended by, in all, after each run (its own log)."""
    note: str = ""
    error: str = ""
    other_cores: float | None = None
    """Cores other processes used on average while its setting was measured (None: not
    known)."""
    measured: int = 1
    """Times its setting was measured (twice when the machine was busy the first time; the
    less loaded one is kept)."""

    @property
    def busy(self) -> bool:
        """Other processes kept the machine busy while it was measured."""
        return self.other_cores is not None and self.other_cores > BUSY_CORES

    @property
    def warmup(self) -> int:
        """Runs left out of the fit: the first tenth, at least two."""
        return max(2, len(self.rss) // 10)

    @property
    def fit(self) -> tuple[float, float, float]:
        """Growth per run in bytes: the Theil-Sen slope and Sen's 95 % interval."""
        return theil_sen(self.rss[self.warmup :])

    @property
    def grown(self) -> int:
        """Resident bytes gained over the fitted runs."""
        tail = self.rss[self.warmup :]
        return tail[-1] - tail[0] if len(tail) > 1 else 0

    @property
    def arena_grown(self) -> int:
        """Bytes the arena extended by over the fitted runs."""
        tail = self.arena[self.warmup :]
        return tail[-1] - tail[0] if len(tail) > 1 else 0

    @property
    def growing(self) -> bool:
        slope, low, _ = self.fit
        return not math.isnan(slope) and low > FLAT_MB * MB

    @property
    def flat(self) -> bool:
        _, low, high = self.fit
        return not math.isnan(low) and low >= -FLAT_MB * MB and high <= FLAT_MB * MB

    def verdict(self) -> str:
        """'grows 11.2 MB/run [10.8, 11.6]', 'flat (within ±0.05 MB/run)', or what the interval
        cannot tell."""
        if self.error:
            return f"not measured: {self.error}"
        slope, low, high = self.fit
        if math.isnan(slope):
            return f"too few runs for a slope ({len(self.rss)})"
        load = ""
        if self.busy:  # what a busy machine shows, said with it
            load = f"other processes used {self.other_cores:.1f} cores"
            load += ", measured twice" if self.measured > 1 else ""
        if self.flat:
            return f"flat (within ±{FLAT_MB} MB/run{'; ' + load if load else ''})"
        said = f"{slope / MB:.2f} MB/run [{low / MB:.2f}, {high / MB:.2f}]"
        said += f" ({load})" if load else ""
        return f"grows {said}" if self.growing else f"no growth shown beyond noise: {said}"

    def arena_said(self) -> str:
        """What ORT's arena did over the fitted runs: how much it extended by, and the share
        of the growth that is."""
        if not self.rss or self.error:
            return ""
        if self.arena_grown == 0:
            return "the arena did not extend (memory it had reserved filling, or outside it)"
        said = f"the arena extended by {fmt_bytes(self.arena_grown)}"
        if self.growing and 0 < self.grown < self.arena_grown:
            said += " (more than the growth: it gave memory back after runs and took it again)"
        elif self.growing and self.grown > 0:
            said += f", {self.arena_grown / self.grown:.0%} of the growth"
        return said


@dataclass(frozen=True)
class SoakResult(Result):
    """Per setting and phase: growth per run with its interval and verdict.

    ``plot()``: the resident set after each run, one line per setting, the phases one after
    another."""

    model: str
    config: SessionConfig
    rows: list[SoakSeries]
    runs: int
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)

    @table
    def table(self) -> Table:
        import pandas as pd

        out = []
        for r in self.rows:
            slope, low, high = r.fit
            out.append(
                {
                    "setting": r.setting,
                    "phase": r.phase,
                    "runs": len(r.rss),
                    "mb_per_run": slope / MB,
                    "mb_low": low / MB,
                    "mb_high": high / MB,
                    "rss_start_bytes": r.rss[0] if r.rss else math.nan,
                    "rss_end_bytes": r.rss[-1] if r.rss else math.nan,
                    "arena_extended_bytes": r.arena_grown,
                    "verdict": r.verdict(),
                    "arena": r.arena_said(),
                }
            )
        return pd.DataFrame(out)

    def to_pandas(self) -> Table:
        """setting, phase, runs, mb_per_run with its interval (mb_low, mb_high), the resident
        set at the phase's first and last run, the arena's extensions over the fitted runs,
        verdict, arena (what the arena did, in words)."""
        return self.table

    def grows(self, setting: str = "as configured") -> list[SoakSeries]:
        """The phases in which ``setting``'s memory grows beyond noise."""
        return [r for r in self.rows if r.setting == setting and r.growing]

    def stops_it(self) -> list[str]:
        """The settings under which no phase grows where the configured session's does."""
        grew = {r.phase for r in self.grows()}
        if not grew:
            return []
        settings = dict.fromkeys(r.setting for r in self.rows if r.setting != "as configured")
        return [
            s
            for s in settings
            if all(
                not r.growing and not r.error
                for r in self.rows
                if r.setting == s and r.phase in grew
            )
        ]

    def sentence(self) -> str:
        """The one line: whether memory grows as configured, where, and what stops it."""
        grew = self.grows()
        if not grew:
            return f"{self.model}: no growth run after run as configured ({self.runs} runs a phase)"
        said = "; ".join(f"{r.phase}: {r.verdict()}, {r.arena_said()}" for r in grew)
        stops = self.stops_it()
        fix = f"; stopped by {', '.join(stops)}" if stops else "; no setting measured stops it"
        return f"{self.model}: memory grows as configured ({said}){fix}"

    def headline(self) -> dict[str, object] | None:
        return {
            "grows_mb_per_run": {r.phase: r.fit[0] / MB for r in self.grows()},
            "stopped_by": self.stops_it(),
        }

    def __repr__(self) -> str:
        return f"<SoakResult {self.sentence()}>"


def soak(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    runs: int = 60,
    phases: Sequence[str] = PHASES,
    settings: Sequence[str] | None = None,
    **reach: Unpack[Reach],
) -> SoakResult:
    """Run ``model`` ``runs`` times per phase under each setting, each in a process of its own,
    and fit how its resident memory grows per run. ``phases``: any of :data:`PHASES` ('fresh
    shapes' needs free dims and ortlab's own inputs: with your feeds it is left out, said in a
    note). ``settings``: labels of :func:`soak_settings` to measure (default all: as
    configured, arena off, shrunk after each run, kSameAsRequested). A phase stops early when
    less than 15 % of the machine's memory is left (said).

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`)."""
    unknown = [p for p in phases if p not in PHASES]
    if unknown or not phases:
        from ortlab.core.errors import OptionError

        raise OptionError(f"phases {unknown or list(phases)}: choose from {', '.join(PHASES)}.")
    if runs < 10:
        from ortlab.core.errors import OptionError

        raise OptionError(f"runs={runs}: a slope needs at least 10 runs a phase.")
    return soak_run(edge(model, config, feeds, runs=runs, **reach), phases, settings)


def soak_run(
    run: Run,
    phases: Sequence[str] = PHASES,
    settings: Sequence[str] | None = None,
    *,
    again_if_busy: bool = True,
) -> SoakResult:
    """:func:`soak`'s body, for a :class:`Run` resolved already (its ``runs`` per phase). A
    setting measured while other processes kept the machine busy is measured once more and
    the less loaded measurement kept (``again_if_busy``); its verdict says the load either
    way."""
    m, cfg, f, runs = run.model, run.config, run.inputs, run.runs
    notes = []
    dims = {n: c.value for n, c in f.dims.items()}
    wanted = list(phases)
    if "fresh shapes" in wanted and (not f.synthetic or not dims):
        wanted.remove("fresh shapes")
        why = "your feeds fix the shapes" if not f.synthetic else "the model has no free dims"
        notes.append(f"No 'fresh shapes' phase: {why}.")
    chosen = soak_settings(cfg)
    if settings is not None:
        known = [s[0] for s in chosen]
        missing = [s for s in settings if s not in known]
        if missing:
            from ortlab.core.errors import OptionError

            raise OptionError(f"settings {missing}: choose from {', '.join(known)}.")
        chosen = [s for s in chosen if s[0] in settings]
    got = run_task(
        tasks_memory.soak,
        Via(
            desc=f"soak {m.name}",
            context=f"of {m.name!r}",
            progress=run.progress,
            timeout=run.timeout,
        ),
        model_path=str(m.path),
        name=m.name,
        settings=chosen,
        feeds=dict(f),
        dims=dims,
        phases=wanted,
        runs=int(runs),
        timeout_s=run.timeout or 3600.0,
        again_if_busy=again_if_busy,
    )
    rows: list[SoakSeries] = []
    for item in got:
        if item.error or not item.series:
            why = item.error or "no answer"
            rows += [SoakSeries(item.setting, p, [], [], error=why) for p in wanted]
            continue
        rows += [
            SoakSeries(
                item.setting,
                s.phase,
                s.rss,
                s.arena,
                note=s.note,
                other_cores=item.other_cores,
                measured=item.measured,
            )
            for s in item.series
        ]
    notes += [f"{r.setting}, {r.phase}: {r.note}" for r in rows if r.note]
    busy = {r.setting: r for r in rows if r.busy}
    if busy:
        notes.append(
            f"Other processes kept the machine busy while {', '.join(busy)} "
            f"{'was' if len(busy) == 1 else 'were'} measured "
            f"({', '.join(f'{r.other_cores:.1f}' for r in busy.values())} cores"
            + (
                "; measured twice, the less loaded kept"
                if any(r.measured > 1 for r in busy.values())
                else ""
            )
            + "): memory the arena gives back and takes again grows or not with which of "
            "ORT's threads ran what, so a busy machine can hide growth an idle one shows (a "
            "plain onnxruntime loop measured 16 KB a run with a core busy, 3 MB idle); re-run "
            "idle to confirm."
        )
    notes += [
        "Resident set: the session's process after each run (its own process per setting: "
        "another setting's leftovers never read as growth); growth per run: the Theil-Sen "
        f"slope over the runs after the first tenth, with Sen's 95 % interval (it assumes the "
        "runs' noise independent); the arena's extensions: ORT's own log at INFO. "
        f"{fmt_bytes(FLAT_MB * MB)} a run either way is flat.",
        *f.notes,
    ]
    return SoakResult(
        model=m.name,
        config=cfg,
        rows=rows,
        runs=int(runs),
        feeds=f.describe(),
        synthetic=f.synthetic,
        notes=notes,
    )
