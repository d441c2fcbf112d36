"""Registers every built-in renderer with :mod:`ortlab.core.display`: one line per (result
type, format). ``import ortlab`` imports this module, so any result shows itself in a notebook
(``_repr_html_``), a terminal (``to_text``) and a figure (``plot``) without the result's module
ever importing a view."""

from __future__ import annotations

from typing import Any, TypeVar

from ortlab.analysis.benchmark import BenchmarkResult, ConfigComparison
from ortlab.analysis.diff import DiffResult
from ortlab.analysis.diverge import DivergenceResult
from ortlab.analysis.fleet.merge import MergeResult
from ortlab.analysis.generation.bench import LLMBenchResult
from ortlab.analysis.generation.generate import GenerationResult
from ortlab.analysis.generation.quality import KLDResult
from ortlab.analysis.limits.cost import CostResult
from ortlab.analysis.limits.roofline import RooflineResult
from ortlab.analysis.memory import FootprintResult
from ortlab.analysis.optimizers.ablation import AblationResult
from ortlab.analysis.optimizers.levels import OptimizationResult
from ortlab.analysis.optimizers.transformers import TransformerOptResult
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.placement.whatifresult import WhatIfResult
from ortlab.analysis.profiling import ProfileResult
from ortlab.analysis.quantization.compare import CompareResult
from ortlab.analysis.quantization.error import ErrorResult
from ortlab.analysis.soak import SoakResult
from ortlab.analysis.sweep import SweepResult
from ortlab.analysis.throughput import ThroughputResult
from ortlab.analysis.versions import VersionDiffResult
from ortlab.core.config import SessionConfig
from ortlab.core.display import Renderer, register
from ortlab.core.model import ModelSummary
from ortlab.core.sessionreport import SessionReport
from ortlab.diagnosis.best import Best
from ortlab.diagnosis.doctor import DoctorResult
from ortlab.views import (
    accelerators,
    benchmark,
    cost,
    diff,
    diverge,
    doctor,
    generate,
    llamabench,
    llmbench,
    memory,
    merge,
    model,
    optimization,
    placement,
    profile,
    quality,
    quantization,
    session,
    snippet,
    sweep,
    throughput,
    versions,
)

R = TypeVar("R")


def _row(cls: type[R], fmt: str, fn: Renderer[R]) -> tuple[type, str, Renderer[Any]]:
    """One registry row, its renderer type-checked against its class: a renderer of
    another result (or a renamed field it reads) is a type error here."""
    return cls, fmt, fn


RENDERERS: list[tuple[type, str, Renderer[Any]]] = [
    _row(ModelSummary, "html", model.model_summary_html),
    _row(ModelSummary, "text", model.model_summary_text),
    _row(ModelSummary, "plot", model.model_figure),
    _row(SessionReport, "html", session.session_report_html),
    _row(SessionReport, "text", session.session_report_text),
    _row(SessionReport, "plot", session.session_report_figure),
    _row(BenchmarkResult, "html", benchmark.benchmark_html),
    _row(BenchmarkResult, "text", benchmark.benchmark_text),
    _row(BenchmarkResult, "plot", benchmark.benchmark_figure),
    _row(ConfigComparison, "html", benchmark.config_comparison_html),
    _row(ConfigComparison, "text", benchmark.config_comparison_text),
    _row(ConfigComparison, "plot", benchmark.config_comparison_figure),
    _row(ProfileResult, "html", profile.profile_html),
    _row(ProfileResult, "text", profile.profile_text),
    _row(ProfileResult, "plot", profile.profile_figure),
    _row(PlacementResult, "html", placement.placement_html),
    _row(PlacementResult, "text", placement.placement_text),
    _row(PlacementResult, "plot", placement.placement_figure),
    _row(OptimizationResult, "html", optimization.optimization_html),
    _row(OptimizationResult, "text", optimization.optimization_text),
    _row(OptimizationResult, "plot", optimization.optimization_figure),
    _row(DiffResult, "html", diff.diff_html),
    _row(DiffResult, "text", diff.diff_text),
    _row(DiffResult, "plot", diff.diff_figure),
    _row(VersionDiffResult, "html", versions.versions_html),
    _row(VersionDiffResult, "text", versions.versions_text),
    _row(VersionDiffResult, "plot", versions.versions_figure),
    _row(AblationResult, "html", optimization.ablation_html),
    _row(AblationResult, "text", optimization.ablation_text),
    _row(AblationResult, "plot", optimization.ablation_figure),
    _row(CostResult, "html", cost.cost_html),
    _row(CostResult, "text", cost.cost_text),
    _row(CostResult, "plot", cost.cost_figure),
    _row(RooflineResult, "html", cost.roofline_html),
    _row(RooflineResult, "text", cost.roofline_text),
    _row(RooflineResult, "plot", cost.roofline_figure),
    _row(SweepResult, "html", sweep.sweep_html),
    _row(SweepResult, "text", sweep.sweep_text),
    _row(SweepResult, "plot", sweep.sweep_figure),
    _row(GenerationResult, "html", generate.generate_html),
    _row(GenerationResult, "text", generate.generate_text),
    _row(GenerationResult, "plot", generate.generate_figure),
    _row(LLMBenchResult, "html", llmbench.llm_bench_html),
    _row(LLMBenchResult, "text", llmbench.llm_bench_text),
    _row(LLMBenchResult, "plot", llmbench.llm_bench_figure),
    _row(LLMBenchResult, "md", llamabench.bench_md),
    _row(LLMBenchResult, "csv", llamabench.bench_csv),
    _row(LLMBenchResult, "json", llamabench.bench_json),
    _row(LLMBenchResult, "jsonl", llamabench.bench_jsonl),
    _row(LLMBenchResult, "sql", llamabench.bench_sql),
    _row(MergeResult, "html", merge.merge_html),
    _row(MergeResult, "text", merge.merge_text),
    _row(MergeResult, "plot", merge.merge_figure),
    _row(KLDResult, "html", quality.kld_html),
    _row(KLDResult, "text", quality.kld_text),
    _row(KLDResult, "plot", quality.kld_figure),
    _row(ThroughputResult, "html", throughput.throughput_html),
    _row(ThroughputResult, "text", throughput.throughput_text),
    _row(ThroughputResult, "plot", throughput.throughput_figure),
    _row(FootprintResult, "html", memory.footprint_html),
    _row(FootprintResult, "text", memory.footprint_text),
    _row(FootprintResult, "plot", memory.footprint_figure),
    _row(SoakResult, "html", memory.soak_html),
    _row(SoakResult, "text", memory.soak_text),
    _row(SoakResult, "plot", memory.soak_figure),
    _row(TransformerOptResult, "html", optimization.transformer_html),
    _row(TransformerOptResult, "text", optimization.transformer_text),
    _row(TransformerOptResult, "plot", optimization.transformer_figure),
    _row(CompareResult, "html", quantization.compare_html),
    _row(CompareResult, "text", quantization.compare_text),
    _row(CompareResult, "plot", quantization.compare_figure),
    _row(DivergenceResult, "html", diverge.diverge_html),
    _row(DivergenceResult, "text", diverge.diverge_text),
    _row(DivergenceResult, "plot", diverge.diverge_figure),
    _row(ErrorResult, "html", quantization.error_html),
    _row(ErrorResult, "text", quantization.error_text),
    _row(ErrorResult, "plot", quantization.error_figure),
    _row(WhatIfResult, "html", accelerators.whatif_html),
    _row(WhatIfResult, "text", accelerators.whatif_text),
    _row(WhatIfResult, "plot", accelerators.whatif_figure),
    _row(DoctorResult, "html", doctor.doctor_html),
    _row(DoctorResult, "text", doctor.doctor_text),
    _row(DoctorResult, "plot", doctor.doctor_figure),
    _row(SessionConfig, "snippet", snippet.config_snippet),
    _row(Best, "snippet", doctor.best_snippet),
    _row(Best, "text", doctor.best_text),
]

for _cls, _fmt, _fn in RENDERERS:
    register(_cls, _fmt, _fn)
