"""The records of many runs as one comparison (``ortlab.merge``, ``ortlab merge``): rows are
the spec's items (a llama-bench test each, for llm_bench), columns the machines or onnxruntime
versions that ran them, each cell the item's figure (its median, with the median's
distribution-free interval) and a verdict against the baseline column: the ratio of the two
columns' samples (Hodges-Lehmann on their logarithms, Mann-Whitney's interval: independent
runs, not interleaved — said so in every verdict). ``fail_on`` turns it into a CI gate."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec
import numpy as np

from ortlab.core.errors import OptionError
from ortlab.core.result import Result, Table, table
from ortlab.core.stats import median_with_interval, shift_interval
from ortlab.core.units import tokens_per_s

__all__ = [
    "COLUMNS_BY",
    "Cell",
    "MergeResult",
    "MergeRow",
    "Regression",
    "merge",
    "read_records",
]

COLUMNS_BY = ("machine", "onnxruntime", "machine+onnxruntime")
NOISE = 0.05
"""A ratio within ±5 % of 1 reads as no measurable difference, whatever its interval (two
runs on two machines or two versions are never interleaved: a fresh session's layout alone
moves a figure by a few per cent, which one session's samples cannot show)."""

Figure = tuple[str, str, bool, list[float]]
"""A record's figure: (name, unit, higher is better, samples)."""


class _Item(msgspec.Struct):
    key: str


class _System(msgspec.Struct):
    hostname: str = "?"
    node: str = ""


class _Runtime(msgspec.Struct):
    version: str = "?"


class _Record(msgspec.Struct):
    system: _System = msgspec.field(default_factory=_System)
    runtime: _Runtime = msgspec.field(default_factory=_Runtime)


class _Error(msgspec.Struct):
    type: str = ""
    message: str = ""


class _Doc(msgspec.Struct):
    """What the merge reads of a record (msgspec skips the rest unread)."""

    ortlab: str
    item: _Item
    record: _Record = msgspec.field(default_factory=_Record)
    error: _Error | None = None
    data: msgspec.Raw = msgspec.Raw(b"null")


class _Bench(msgspec.Struct):
    latencies_ns: list[int]


class _Trace(msgspec.Struct):
    run_us: list[float] = msgspec.field(default_factory=list)


class _Profile(msgspec.Struct):
    data: _Trace = msgspec.field(default_factory=_Trace)


class _Placement(msgspec.Struct):
    profile: _Profile | None = None


class _Generation(msgspec.Struct):
    steps_ms: list[list[float]]
    batch: int = 1


class _LlamaRow(msgspec.Struct):
    test: str
    n_prompt: int
    n_gen: int
    n_threads: int
    samples_ns: list[int]
    n_depth: int = 0
    n_seq: int = 1


class _LlamaBench(msgspec.Struct):
    rows: list[_LlamaRow]


def _figures(kind: str, raw: msgspec.Raw) -> Iterator[tuple[str, Figure]]:
    """(row suffix, figure) for each figure a record of ``kind`` holds."""
    decode = msgspec.json.decode
    if kind == "BenchmarkResult":
        b = decode(raw, type=_Bench)
        yield "", ("p50", "ms", False, [x / 1e6 for x in b.latencies_ns])
    elif kind in ("ProfileResult", "PlacementResult"):
        prof = decode(raw, type=_Profile) if kind == "ProfileResult" else None
        if prof is None:
            prof = decode(raw, type=_Placement).profile or _Profile()
        yield "", ("median run (profiling on)", "ms", False, [x / 1e3 for x in prof.data.run_us])
    elif kind == "GenerationResult":
        g = decode(raw, type=_Generation)
        rates = [
            tokens_per_s(g.batch * (len(r) - 1), float(sum(r[1:])))
            for r in g.steps_ms
            if len(r) > 1
        ]
        yield "", ("decode", "tokens/s", True, rates)
    elif kind == "LLMBenchResult":
        for row in decode(raw, type=_LlamaBench).rows:
            depth = f" @ d{row.n_depth}" if row.n_depth else ""
            tokens = (row.n_prompt + row.n_gen) * row.n_seq
            rates = [tokens_per_s(tokens, ns / 1e6) for ns in row.samples_ns if ns > 0]
            yield (
                f" · {row.test}{depth} · {row.n_threads} threads",
                ("t/s", "tokens/s", True, rates),
            )


@dataclass(frozen=True)
class Cell:
    """One item on one column: the figure's median and its interval, how many samples, and
    the verdict against the baseline column ('' on the baseline)."""

    value: float
    low: float
    high: float
    samples: int
    ratio: float = math.nan
    ratio_low: float = math.nan
    ratio_high: float = math.nan
    verdict: str = ""
    failed: str = ""
    """The item's error where it failed on this column (no figure then)."""


@dataclass(frozen=True)
class MergeRow:
    item: str
    figure: str
    unit: str
    higher_is_better: bool
    cells: dict[str, Cell] = field(default_factory=dict)


def read_records(folders: Sequence[str | Path]) -> Iterator[_Doc]:
    """Every ortlab record (a JSON with 'ortlab' and 'item') under ``folders``."""
    for folder in folders:
        root = Path(folder).expanduser()
        if not root.exists():
            raise OptionError(f"merge: {root} does not exist")
        paths = [root] if root.is_file() else sorted(root.rglob("*.json"), key=str)
        for path in paths:
            try:
                yield msgspec.json.decode(path.read_bytes(), type=_Doc)
            except (OSError, msgspec.DecodeError):
                continue  # not a record of ortlab run: another JSON in the folder


def _column(doc: _Doc, by: str) -> str:
    host = doc.record.system.node or doc.record.system.hostname  # a cluster's node, else host
    version = doc.record.runtime.version
    return {"machine": host, "onnxruntime": f"onnxruntime {version}"}.get(
        by, f"{host} · onnxruntime {version}"
    )


def _logs(samples: list[float]) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    return np.log(x[x > 0])


def _verdict(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float] | None:
    """The ratio of the samples whose logarithms are ``b`` to those of ``a``, and its
    interval: Hodges-Lehmann with Mann-Whitney's interval (None with fewer than 4 a side)."""
    if a.size < 4 or b.size < 4:
        return None
    shift, low, high, _ = shift_interval(a, b)
    return math.exp(shift), math.exp(low), math.exp(high)


def _say(row: MergeRow, ratio: float, lo: float, hi: float) -> str:
    if math.isnan(lo):
        return f"{ratio:.2f}x (no interval: too few samples; independent runs)"
    worse = (ratio > 1) != row.higher_is_better  # a time up, or a rate down
    ci = f"{ratio:.2f}x [{lo:.2f}, {hi:.2f}] (independent runs, not interleaved)"
    if lo <= 1 <= hi or 1 - NOISE <= ratio <= 1 + NOISE:
        return f"no measurable difference: {ci}"
    return f"{'worse' if worse else 'better'}: {ci}"


@dataclass(frozen=True)
class Regression:
    """One cell worse than the baseline beyond noise: by how much, as a slowdown (a time's
    ratio, a rate's inverse: 1.25 is 25 % slower either way) with its interval."""

    item: str
    figure: str
    column: str
    slowdown: float
    low: float
    high: float
    baseline_value: float
    value: float
    unit: str


def _regression(row: MergeRow, col: str, c: Cell, base: Cell | None) -> Regression | None:
    if math.isnan(c.ratio_low) or not c.verdict.startswith("worse"):
        return None
    lo, mid, hi = (
        (1 / c.ratio_high, 1 / c.ratio, 1 / c.ratio_low)
        if row.higher_is_better
        else (c.ratio_low, c.ratio, c.ratio_high)
    )
    before = base.value if base is not None else math.nan
    return Regression(row.item, row.figure, col, mid, lo, hi, before, c.value, row.unit)


@dataclass(frozen=True)
class MergeResult(Result):
    """``ortlab.merge``: one row per item (and llama-bench test), one column per machine or
    onnxruntime version, each cell the figure with its interval and a verdict against
    :attr:`baseline`. ``failures()``: the cells a ``fail_on`` gate finds beyond it."""

    rows: list[MergeRow]
    columns: list[str]
    baseline: str
    by: str
    records: int
    fail_on: str = ""
    notes: list[str] = field(default_factory=list)

    def failures(self) -> list[str]:
        """Each cell beyond the ``fail_on`` gate, in words (empty: the gate passes)."""
        gate = parse_gate(self.fail_on) if self.fail_on else None
        out = []
        for row in self.rows:
            for col, c in row.cells.items():
                if gate is not None and gate(row, c):
                    out.append(f"{row.item} on {col}: {c.verdict}")
        return out

    def regressions(self) -> list[Regression]:
        """Every cell worse than the baseline beyond noise (its whole interval), ranked by
        the interval's end nearest 1 (the slowdown the data assure at least), then by the
        slowdown itself: the first is the surest, largest regression."""
        out = [
            reg
            for row in self.rows
            for col, c in row.cells.items()
            if col != self.baseline
            and (reg := _regression(row, col, c, row.cells.get(self.baseline))) is not None
        ]
        return sorted(out, key=lambda r: (-r.low, -r.slowdown, r.item))

    @table
    def table(self) -> Table:
        """One row per item and column: item, figure, unit, column, value, low, high,
        samples, ratio, ratio_low, ratio_high, verdict, failed."""
        import pandas as pd

        return pd.DataFrame(
            [
                {"item": r.item, "figure": r.figure, "unit": r.unit, "column": col, **c.__dict__}
                for r in self.rows
                for col, c in r.cells.items()
            ]
        )

    def to_pandas(self) -> Table:
        """The :attr:`table`."""
        return self.table

    def __repr__(self) -> str:
        gate = f"; gate {self.fail_on!r}: {len(self.failures())} beyond" if self.fail_on else ""
        return (
            f"<MergeResult: {len(self.rows)} items x {len(self.columns)} {self.by} columns "
            f"from {self.records} records, baseline {self.baseline!r}{gate}>"
        )


_GATE = re.compile(r"^\s*(?P<fig>.+?)\s*(?P<op>[<>])\s*(?P<x>[\d.]+)\s*x\s*(baseline)?\s*$")


def parse_gate(text: str) -> Callable[[MergeRow, Cell], bool]:
    """``"p50 > 1.10x baseline"``: a cell fails when its figure's ratio to the baseline is
    beyond the threshold with its whole interval (a regression beyond noise); the figure is
    named as the rows name it ('p50', 't/s', 'decode'), or 'any'."""
    m = _GATE.match(text)
    if not m:
        raise OptionError(
            f"fail-on: {text!r}: write FIGURE > Nx baseline or FIGURE < Nx baseline, e.g. "
            "'p50 > 1.10x baseline' or 'decode < 0.90x baseline'"
        )
    fig, op, x = m["fig"], m["op"], float(m["x"])

    def beyond(row: MergeRow, c: Cell) -> bool:
        if fig not in ("any", row.figure) or math.isnan(c.ratio_low):
            return False
        return c.ratio_low > x if op == ">" else c.ratio_high < x

    return beyond


Pooled = dict[tuple[str, str], tuple[Figure, list[float]]]


def _pool(
    folders: Sequence[str | Path], by: str
) -> tuple[Pooled, dict[tuple[str, str], str], set[str], int]:
    """Every record's samples by (item, column), pooled; the failures; the columns."""
    pooled: Pooled = {}
    failed: dict[tuple[str, str], str] = {}
    columns: set[str] = set()
    count = 0
    for doc in read_records(folders):
        count += 1
        col = _column(doc, by)
        columns.add(col)
        if doc.error is not None or doc.ortlab == "Failure":
            err = doc.error or _Error()
            failed[(doc.item.key, col)] = f"{err.type}: {err.message}"
            continue
        for suffix, fig in _figures(doc.ortlab, doc.data):
            key = (doc.item.key + suffix, col)
            if key in pooled:
                pooled[key][1].extend(fig[3])
            else:
                pooled[key] = (fig, list(fig[3]))
    if not count:
        raise OptionError(
            f"merge: no ortlab records under {', '.join(map(str, folders))} (ortlab run "
            "SPEC -o DIR writes them)"
        )
    return pooled, failed, columns, count


def _natural(text: str) -> list[tuple[int, str]]:
    """'onnxruntime 1.9.0' before 'onnxruntime 1.10.0': numbers compared as numbers."""
    return [(int(t), "") if t.isdigit() else (-1, t) for t in re.split(r"(\d+)", text)]


def _rows(pooled: Pooled, base: str) -> dict[str, MergeRow]:
    """Each item's row: its cells, each against the baseline column's samples."""
    rows: dict[str, MergeRow] = {}
    for (item, col), (fig, samples) in pooled.items():
        row = rows.setdefault(item, MergeRow(item, fig[0], fig[1], fig[2]))
        mid, low, high, _ = median_with_interval(samples)
        row.cells[col] = Cell(mid, low, high, len(samples))
    for row in rows.values():
        base_samples = pooled.get((row.item, base))
        if base_samples is None:
            continue
        logs = _logs(base_samples[1])  # once per row
        for col, c in list(row.cells.items()):
            if col == base:
                continue
            got = _verdict(logs, _logs(pooled[(row.item, col)][1]))
            if got is None:
                row.cells[col] = replace(c, verdict="too few samples for an interval")
                continue
            ratio, lo, hi = got
            row.cells[col] = replace(
                c, ratio=ratio, ratio_low=lo, ratio_high=hi, verdict=_say(row, ratio, lo, hi)
            )
    return rows


def merge(
    folders: Sequence[str | Path],
    *,
    by: str = "machine",
    baseline: str | None = None,
    fail_on: str = "",
) -> MergeResult:
    """The records under ``folders`` (``ortlab run`` writes them) as one comparison: a row
    per item, a column per ``by`` ('machine', 'onnxruntime' or 'machine+onnxruntime'), the
    ``baseline`` column (default: the first in name order, numbers as numbers: the oldest
    onnxruntime) the one each cell is compared with; :meth:`MergeResult.regressions` ranks
    what is worse than it. Records of one item on one column are pooled (their samples together)."""
    if by not in COLUMNS_BY:
        raise OptionError(f"merge: by is one of {', '.join(COLUMNS_BY)} (got {by!r})")
    if fail_on:
        parse_gate(fail_on)  # refused before any reading
    pooled, failed, columns, count = _pool(folders, by)
    ordered = sorted(columns, key=_natural)
    base = baseline or ordered[0]
    if base not in columns:
        raise OptionError(f"merge: baseline {base!r} is none of the columns: {', '.join(ordered)}")
    rows = _rows(pooled, base)
    for (item, col), error in failed.items():
        row = rows.setdefault(item, MergeRow(item, "", "", False))
        row.cells[col] = Cell(math.nan, math.nan, math.nan, 0, failed=error)
    notes = [
        "Each cell: the median of the item's samples on that column with the median's "
        "distribution-free interval; verdicts: the ratio to the baseline column "
        "(Hodges-Lehmann on the logarithms, Mann-Whitney's 95 % interval) — independent "
        f"runs, never interleaved, so ratios within ±{NOISE:.0%} read as no measurable "
        "difference."
    ]
    return MergeResult(
        rows=sorted(rows.values(), key=lambda r: r.item),
        columns=ordered,
        baseline=base,
        by=by,
        records=count,
        fail_on=fail_on,
        notes=notes,
    )
