"""ortlab: see inside ONNX Runtime — where each node runs, what ORT fused, where the time goes.

The core (this namespace) imports no UI library; widgets live in ``ortlab.widgets``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from ortlab import examples
from ortlab.benchmark import BenchmarkResult, ConfigComparison, benchmark, compare_configs
from ortlab.compare import CompareResult, compare
from ortlab.config import SessionConfig
from ortlab.doctor import Best, DoctorResult, doctor
from ortlab.errors import (
    ExternalDataError,
    FeedError,
    InvalidModelError,
    OrtlabError,
    OrtlabWarning,
    ProfileParseError,
    ProviderError,
    ProviderFallbackError,
    ProviderFallbackWarning,
    RunError,
    SessionConfigError,
    SessionCreationError,
    UnsupportedModelError,
    WorkerCancelledError,
    WorkerCrashedError,
    WorkerError,
    WorkerTimeoutError,
)
from ortlab.inputs import Feeds
from ortlab.model import Model, ModelSummary, load, without_initializer_inputs
from ortlab.optimization import OptimizationResult, optimization_diff
from ortlab.placement import PlacementResult, placement
from ortlab.profiling import ProfileResult, parse_profile, parse_profile_file, profile
from ortlab.quant_error import ErrorResult, quantization_error
from ortlab.quantization import QuantConfig, QuantizationError, quantize, to_fp16
from ortlab.report import report
from ortlab.rules import Finding
from ortlab.runtime import devices
from ortlab.session import SessionReport
from ortlab.stats import paired_ratio
from ortlab.transformer_opt import TransformerOptResult, transformer_optimize
from ortlab.worker import set_isolation


def graph(
    model: Model | str,
    placement: PlacementResult | None = None,
    profile: ProfileResult | None = None,
    error: ErrorResult | None = None,
    **options: object,
) -> object:
    """The graph view widget (imports the UI layer on first use)."""
    from ortlab.graphdata import graph_data
    from ortlab.widgets import GraphWidget

    return GraphWidget(
        graph_data(model, placement=placement, profile=profile, error=error), **options
    )


def Lab(model: Model | str, **options: Any) -> object:  # noqa: N802 - reads as a class
    """The Lab widget: controls, tabs (overview, graph, placement, profile, benchmark,
    optimization, quantization, history). Imports the UI layer on first use."""
    from ortlab.widgets.lab import Lab as _Lab

    return _Lab(model, **options)


def graph_diff(opt: OptimizationResult, a: str = "disabled", b: str = "all") -> object:
    """Two linked graph views of an optimization diff: what each node became at level ``b``."""
    from ortlab.widgets.diff import graph_diff as _diff

    return _diff(opt, a, b)


def netron(model: Model | str, height: int = 700) -> object:
    """Netron on 127.0.0.1, embedded (the raw model; no runtime data). ``.stop()`` ends it."""
    from ortlab.widgets.netron import netron as _netron

    return _netron(model, height=height)


__all__ = [
    "BenchmarkResult",
    "Best",
    "CompareResult",
    "ConfigComparison",
    "DoctorResult",
    "ErrorResult",
    "ExternalDataError",
    "FeedError",
    "Feeds",
    "Finding",
    "InvalidModelError",
    "Lab",
    "Model",
    "ModelSummary",
    "OptimizationResult",
    "OrtlabError",
    "OrtlabWarning",
    "PlacementResult",
    "ProfileParseError",
    "ProfileResult",
    "ProviderError",
    "ProviderFallbackError",
    "ProviderFallbackWarning",
    "QuantConfig",
    "QuantizationError",
    "RunError",
    "SessionConfig",
    "SessionConfigError",
    "SessionCreationError",
    "SessionReport",
    "TransformerOptResult",
    "UnsupportedModelError",
    "WorkerCancelledError",
    "WorkerCrashedError",
    "WorkerError",
    "WorkerTimeoutError",
    "__version__",
    "benchmark",
    "compare",
    "compare_configs",
    "devices",
    "doctor",
    "examples",
    "graph",
    "graph_diff",
    "load",
    "netron",
    "optimization_diff",
    "paired_ratio",
    "parse_profile",
    "parse_profile_file",
    "placement",
    "profile",
    "quantization_error",
    "quantize",
    "report",
    "set_isolation",
    "to_fp16",
    "transformer_optimize",
    "without_initializer_inputs",
]
