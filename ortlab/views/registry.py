"""Registers every built-in renderer with :mod:`ortlab.core.display`: one line per (result
type, format). ``import ortlab`` imports this module, so any result shows itself in a notebook
(``_repr_html_``), a terminal (``to_text``) and a figure (``plot``) without the result's module
ever importing a view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ortlab.analysis.benchmark import BenchmarkResult, ConfigComparison
from ortlab.analysis.diff import DiffResult
from ortlab.analysis.diverge import DivergenceResult
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
from ortlab.analysis.sweep import SweepResult
from ortlab.analysis.throughput import ThroughputResult
from ortlab.analysis.versions import VersionDiffResult
from ortlab.core.config import SessionConfig
from ortlab.core.display import register
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
    llmbench,
    memory,
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

RENDERERS: list[tuple[type, str, Callable[..., Any]]] = [
    (ModelSummary, "html", model.model_summary_html),
    (ModelSummary, "text", model.model_summary_text),
    (ModelSummary, "plot", model.model_figure),
    (SessionReport, "html", session.session_report_html),
    (SessionReport, "text", session.session_report_text),
    (SessionReport, "plot", session.session_report_figure),
    (BenchmarkResult, "html", benchmark.benchmark_html),
    (BenchmarkResult, "text", benchmark.benchmark_text),
    (BenchmarkResult, "plot", benchmark.benchmark_figure),
    (ConfigComparison, "html", benchmark.config_comparison_html),
    (ConfigComparison, "text", benchmark.config_comparison_text),
    (ConfigComparison, "plot", benchmark.config_comparison_figure),
    (ProfileResult, "html", profile.profile_html),
    (ProfileResult, "text", profile.profile_text),
    (ProfileResult, "plot", profile.profile_figure),
    (PlacementResult, "html", placement.placement_html),
    (PlacementResult, "text", placement.placement_text),
    (PlacementResult, "plot", placement.placement_figure),
    (OptimizationResult, "html", optimization.optimization_html),
    (OptimizationResult, "text", optimization.optimization_text),
    (OptimizationResult, "plot", optimization.optimization_figure),
    (DiffResult, "html", diff.diff_html),
    (DiffResult, "text", diff.diff_text),
    (DiffResult, "plot", diff.diff_figure),
    (VersionDiffResult, "html", versions.versions_html),
    (VersionDiffResult, "text", versions.versions_text),
    (VersionDiffResult, "plot", versions.versions_figure),
    (AblationResult, "html", optimization.ablation_html),
    (AblationResult, "text", optimization.ablation_text),
    (AblationResult, "plot", optimization.ablation_figure),
    (CostResult, "html", cost.cost_html),
    (CostResult, "text", cost.cost_text),
    (CostResult, "plot", cost.cost_figure),
    (RooflineResult, "html", cost.roofline_html),
    (RooflineResult, "text", cost.roofline_text),
    (RooflineResult, "plot", cost.roofline_figure),
    (SweepResult, "html", sweep.sweep_html),
    (SweepResult, "text", sweep.sweep_text),
    (SweepResult, "plot", sweep.sweep_figure),
    (GenerationResult, "html", generate.generate_html),
    (GenerationResult, "text", generate.generate_text),
    (GenerationResult, "plot", generate.generate_figure),
    (LLMBenchResult, "html", llmbench.llm_bench_html),
    (LLMBenchResult, "text", llmbench.llm_bench_text),
    (LLMBenchResult, "plot", llmbench.llm_bench_figure),
    (KLDResult, "html", quality.kld_html),
    (KLDResult, "text", quality.kld_text),
    (KLDResult, "plot", quality.kld_figure),
    (ThroughputResult, "html", throughput.throughput_html),
    (ThroughputResult, "text", throughput.throughput_text),
    (ThroughputResult, "plot", throughput.throughput_figure),
    (FootprintResult, "html", memory.footprint_html),
    (FootprintResult, "text", memory.footprint_text),
    (FootprintResult, "plot", memory.footprint_figure),
    (TransformerOptResult, "html", optimization.transformer_html),
    (TransformerOptResult, "text", optimization.transformer_text),
    (TransformerOptResult, "plot", optimization.transformer_figure),
    (CompareResult, "html", quantization.compare_html),
    (CompareResult, "text", quantization.compare_text),
    (CompareResult, "plot", quantization.compare_figure),
    (DivergenceResult, "html", diverge.diverge_html),
    (DivergenceResult, "text", diverge.diverge_text),
    (DivergenceResult, "plot", diverge.diverge_figure),
    (ErrorResult, "html", quantization.error_html),
    (ErrorResult, "text", quantization.error_text),
    (ErrorResult, "plot", quantization.error_figure),
    (WhatIfResult, "html", accelerators.whatif_html),
    (WhatIfResult, "text", accelerators.whatif_text),
    (WhatIfResult, "plot", accelerators.whatif_figure),
    (DoctorResult, "html", doctor.doctor_html),
    (DoctorResult, "text", doctor.doctor_text),
    (DoctorResult, "plot", doctor.doctor_figure),
    (SessionConfig, "snippet", snippet.config_snippet),
    (Best, "snippet", doctor.best_snippet),
    (Best, "text", doctor.best_text),
]

for _cls, _fmt, _fn in RENDERERS:
    register(_cls, _fmt, _fn)
