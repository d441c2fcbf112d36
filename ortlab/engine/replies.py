"""What the worker's model tasks send back, as typed records: the caller reads fields mypy
checks, not keys in a dict. Each travels pickled over the worker's connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ortlab.engine.session import SessionReport
from ortlab.engine.trace import ProfileData

__all__ = ["BenchmarkReply", "PlacementReply", "ProfileReply"]


@dataclass(frozen=True)
class BenchmarkReply:
    """``tasks_timing.benchmark``: every timed run, the session's report, whether the session
    came from the worker's cache, the warm-up runs, and ORT's own time (builds and runs)."""

    latencies_ns: list[int]
    report: SessionReport
    cached_session: bool
    warmup: int
    ort_ms: float


@dataclass(frozen=True)
class ProfileReply:
    """``tasks.profile``: the parsed trace and the session's report."""

    data: ProfileData
    report: SessionReport


@dataclass(frozen=True)
class PlacementReply:
    """``tasks.placement``: the profiled runs and the three placement sources (ORT's
    assignment, the verbose log's placements, the final graph) with the EP probes."""

    report: SessionReport
    data: ProfileData
    assignment: list[Any]
    """ORT's assignment API: per EP, its nodes."""
    placements: Any
    """The verbose "Node placements" log, parsed."""
    final: list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]]
    """The final graph's nodes (name, op_type, domain, inputs, outputs, provider)."""
    final_source: str
    """'EPContext dump' or 'optimized model'."""
    probes: Any
    ort_ms: float
