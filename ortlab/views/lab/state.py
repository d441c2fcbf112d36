"""The Lab's state: every result its run and its tab jobs produced, in one typed record.

A job returns its result; the Lab keeps it by swapping in a new :class:`LabState` (``keep``),
so a reader on another thread sees the old state or the new, never half of one. The Lab's
public names for them (``lab.placement``, ``lab.doctor_result``, ``lab.generation``…) read
this record (:data:`PUBLIC_NAMES`); nothing else writes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortlab.analysis.benchmark import BenchmarkResult
from ortlab.analysis.diff import DiffResult
from ortlab.analysis.diverge import DivergenceResult
from ortlab.analysis.generation.bench import LLMBenchResult
from ortlab.analysis.generation.result import GenerationResult
from ortlab.analysis.limits.cost import CostResult
from ortlab.analysis.limits.roofline import RooflineResult
from ortlab.analysis.optimizers.levels import OptimizationResult
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.placement.whatifresult import WhatIfResult
from ortlab.analysis.profiling import ProfileResult
from ortlab.analysis.quantization.compare import CompareResult
from ortlab.analysis.sweep import SweepResult
from ortlab.analysis.throughput import ThroughputResult
from ortlab.analysis.versions import VersionDiffResult
from ortlab.diagnosis.doctor import DoctorResult

__all__ = ["PUBLIC_NAMES", "LabState"]


@dataclass(frozen=True)
class LabState:
    """What the Lab has measured so far; None where that job has not run (or failed first)."""

    placement: PlacementResult | None = None
    """The last run's placement (with profiling on; its profile is :attr:`profile`)."""
    profile: ProfileResult | None = None
    benchmark: BenchmarkResult | None = None
    """The last run's benchmark (profiling off)."""
    doctor: DoctorResult | None = None
    optimization: OptimizationResult | None = None
    comparison: CompareResult | None = None
    """The Quantization tab's variants against the model."""
    divergence: DivergenceResult | None = None
    """The Quantization tab's accuracy view (``ortlab.diverge``)."""
    generation: GenerationResult | None = None
    llm_bench: LLMBenchResult | None = None
    run_diff: DiffResult | None = None
    """History's "compare A and B", per node."""
    whatif: WhatIfResult | None = None
    roofline: RooflineResult | None = None
    cost: CostResult | None = None
    throughput: ThroughputResult | None = None
    sweep: SweepResult | None = None
    version_diff: VersionDiffResult | None = None
    perfetto: Path | None = None
    """The Limits tab's last Perfetto trace file."""
    report_path: Path | None = None

    def keep(self, **results: Any) -> LabState:
        """A new state with ``results`` in place of the old (by field name)."""
        return dataclasses.replace(self, **results)


_RENAMED = {
    "profile": "profile_result",
    "benchmark": "benchmark_result",
    "doctor": "doctor_result",
    "whatif": "whatif_result",
}
PUBLIC_NAMES = {_RENAMED.get(f.name, f.name): f.name for f in dataclasses.fields(LabState)}
"""The Lab's public names for its state's results (``lab.placement``: the Lab's attribute ->
the state's field), read-only. Four end in ``_result``, as scripts have read them since
before the state had a home of its own (``lab.profile_result``)."""
