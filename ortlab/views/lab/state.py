"""The Lab's state: every result its run and its tab jobs produced, in one typed record.

A job returns its result; the Lab keeps it by swapping in a new :class:`LabState` (``keep``),
so a reader on another thread sees the old state or the new, never half of one. The Lab's
public names for them (``lab.placement``, ``lab.doctor_result``, ``lab.generation``…) read
this record (:class:`StateNames`); nothing else writes it.
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

__all__ = ["LabState", "StateNames"]


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


class StateNames:
    """The Lab's public names for its state's results, read-only (kept from before the state
    had a home of its own: scripts and notebooks read ``lab.placement``)."""

    state: LabState

    @property
    def placement(self) -> PlacementResult | None:
        return self.state.placement

    @property
    def profile_result(self) -> ProfileResult | None:
        return self.state.profile

    @property
    def benchmark_result(self) -> BenchmarkResult | None:
        return self.state.benchmark

    @property
    def doctor_result(self) -> DoctorResult | None:
        return self.state.doctor

    @property
    def optimization(self) -> OptimizationResult | None:
        return self.state.optimization

    @property
    def comparison(self) -> CompareResult | None:
        return self.state.comparison

    @property
    def divergence(self) -> DivergenceResult | None:
        return self.state.divergence

    @property
    def generation(self) -> GenerationResult | None:
        return self.state.generation

    @property
    def llm_bench(self) -> LLMBenchResult | None:
        return self.state.llm_bench

    @property
    def run_diff(self) -> DiffResult | None:
        return self.state.run_diff

    @property
    def whatif_result(self) -> WhatIfResult | None:
        return self.state.whatif

    @property
    def roofline(self) -> RooflineResult | None:
        return self.state.roofline

    @property
    def cost(self) -> CostResult | None:
        return self.state.cost

    @property
    def throughput(self) -> ThroughputResult | None:
        return self.state.throughput

    @property
    def sweep(self) -> SweepResult | None:
        return self.state.sweep

    @property
    def version_diff(self) -> VersionDiffResult | None:
        return self.state.version_diff

    @property
    def perfetto(self) -> Path | None:
        return self.state.perfetto

    @property
    def report_path(self) -> Path | None:
        return self.state.report_path
