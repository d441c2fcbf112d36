"""Registers every built-in renderer with :mod:`ortlab.core.display`: one line per (result
type, format). ``import ortlab`` imports this module, so any result shows itself in a notebook
(``_repr_html_``), a terminal (``to_text``) and a figure (``plot``) without the result's module
ever importing a view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ortlab.analysis.benchmark import BenchmarkResult, ConfigComparison
from ortlab.analysis.diff import DiffResult
from ortlab.analysis.generation.generate import GenerationResult
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
from ortlab.diagnosis.doctor import DoctorResult
from ortlab.views import (
    plots,
    profile_figures,
    render,
    render_accelerators,
    render_comparison,
    render_cost,
    render_doctor,
    render_generate,
    render_memory,
    render_optimization,
    render_quantization,
    render_sweep,
    render_throughput,
    render_versions,
    snippet,
)

RENDERERS: list[tuple[type, str, Callable[..., Any]]] = [
    (ModelSummary, "html", render.model_summary_html),
    (ModelSummary, "text", render.model_summary_text),
    (ModelSummary, "plot", plots.model_figure),
    (SessionReport, "html", render.session_report_html),
    (SessionReport, "text", render.session_report_text),
    (SessionReport, "plot", plots.session_report_figure),
    (BenchmarkResult, "html", render.benchmark_html),
    (BenchmarkResult, "text", render.benchmark_text),
    (BenchmarkResult, "plot", plots.benchmark_figure),
    (ConfigComparison, "html", render_comparison.config_comparison_html),
    (ConfigComparison, "text", render_comparison.config_comparison_text),
    (ConfigComparison, "plot", plots.config_comparison_figure),
    (ProfileResult, "html", render.profile_html),
    (ProfileResult, "text", render.profile_text),
    (ProfileResult, "plot", profile_figures.profile_figure),
    (PlacementResult, "html", render.placement_html),
    (PlacementResult, "text", render.placement_text),
    (PlacementResult, "plot", plots.placement_figure),
    (OptimizationResult, "html", render_optimization.optimization_html),
    (OptimizationResult, "text", render_optimization.optimization_text),
    (OptimizationResult, "plot", plots.optimization_figure),
    (DiffResult, "html", render_comparison.diff_html),
    (DiffResult, "text", render_comparison.diff_text),
    (DiffResult, "plot", plots.diff_figure),
    (VersionDiffResult, "html", render_versions.versions_html),
    (VersionDiffResult, "text", render_versions.versions_text),
    (VersionDiffResult, "plot", render_versions.versions_figure),
    (AblationResult, "html", render_optimization.ablation_html),
    (AblationResult, "text", render_optimization.ablation_text),
    (AblationResult, "plot", plots.ablation_figure),
    (CostResult, "html", render_cost.cost_html),
    (CostResult, "text", render_cost.cost_text),
    (CostResult, "plot", render_cost.cost_figure),
    (RooflineResult, "html", render_cost.roofline_html),
    (RooflineResult, "text", render_cost.roofline_text),
    (RooflineResult, "plot", render_cost.roofline_figure),
    (SweepResult, "html", render_sweep.sweep_html),
    (SweepResult, "text", render_sweep.sweep_text),
    (SweepResult, "plot", render_sweep.sweep_figure),
    (GenerationResult, "html", render_generate.generate_html),
    (GenerationResult, "text", render_generate.generate_text),
    (GenerationResult, "plot", render_generate.generate_figure),
    (ThroughputResult, "html", render_throughput.throughput_html),
    (ThroughputResult, "text", render_throughput.throughput_text),
    (ThroughputResult, "plot", render_throughput.throughput_figure),
    (FootprintResult, "html", render_memory.footprint_html),
    (FootprintResult, "text", render_memory.footprint_text),
    (FootprintResult, "plot", plots.footprint_figure),
    (TransformerOptResult, "html", render_optimization.transformer_html),
    (TransformerOptResult, "text", render_optimization.transformer_text),
    (TransformerOptResult, "plot", plots.transformer_figure),
    (CompareResult, "html", render_quantization.compare_html),
    (CompareResult, "text", render_quantization.compare_text),
    (CompareResult, "plot", plots.compare_figure),
    (ErrorResult, "html", render_quantization.error_html),
    (ErrorResult, "text", render_quantization.error_text),
    (ErrorResult, "plot", plots.error_figure),
    (WhatIfResult, "html", render_accelerators.whatif_html),
    (WhatIfResult, "text", render_accelerators.whatif_text),
    (WhatIfResult, "plot", plots.whatif_figure),
    (DoctorResult, "html", render_doctor.doctor_html),
    (DoctorResult, "text", render_doctor.doctor_text),
    (DoctorResult, "plot", plots.doctor_figure),
    (SessionConfig, "snippet", snippet.config_snippet),
]

for _cls, _fmt, _fn in RENDERERS:
    register(_cls, _fmt, _fn)
