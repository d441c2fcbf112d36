"""ortlab: see inside ONNX Runtime — where each node runs, what ORT fused, where the time goes.

The layers, lowest first (ARCHITECTURE.md; import-linter holds them): ``ortlab.core`` (what a
model, inputs, config and result are), ``ortlab.engine`` (the only place ORT runs a model),
``ortlab.analysis`` (the measuring verbs and their results), ``ortlab.diagnosis`` (the doctor),
``ortlab.views`` (text, HTML, figures, the report, the widgets) and ``ortlab.cli``. This
namespace gathers the public API: verbs are functions, results and widgets are classes.
``import ortlab`` loads no UI library: ``ortlab.Lab`` and ``ortlab.GraphView`` import the
widgets on first access.
"""

from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING, Any

# ortlab's own child processes (the worker, footprint and compile children: ORTLAB_CHILD=1,
# set by engine.children.child_env) import only the modules their tasks import. The public
# namespace below loads the analyses, pandas and the renderers (~0.35 s) that no child uses,
# and the worker's start-up is on the path of a Lab's first run.
_CHILD = _os.environ.get("ORTLAB_CHILD") == "1"

if TYPE_CHECKING or not _CHILD:
    from ortlab import views as _views  # registers every renderer (results show themselves)
    from ortlab.analysis.benchmark import (
        BenchmarkResult,
        ConfigComparison,
        benchmark,
        compare_configs,
    )
    from ortlab.analysis.diff import DiffResult, diff
    from ortlab.analysis.diverge import DivergenceResult, diverge
    from ortlab.analysis.fleet.merge import MergeResult, merge
    from ortlab.analysis.fleet.runner import RunSummary, run_spec
    from ortlab.analysis.fleet.spec import Spec, read_spec
    from ortlab.analysis.generation.bench import LLMBenchResult, llm_bench
    from ortlab.analysis.generation.generate import GenerationResult, generate
    from ortlab.analysis.generation.quality import KLDResult, kl_divergence
    from ortlab.analysis.graph.data import GraphData, graph_data
    from ortlab.analysis.limits.cost import CostResult, cost
    from ortlab.analysis.limits.roofline import RooflineResult, roofline
    from ortlab.analysis.memory import FootprintResult, footprint
    from ortlab.analysis.optimizers.ablation import AblationResult, ablate_optimizers
    from ortlab.analysis.optimizers.levels import OptimizationResult, optimization_diff
    from ortlab.analysis.optimizers.transformers import TransformerOptResult, transformer_optimize
    from ortlab.analysis.placement.measure import placement
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.placement.whatif import whatif
    from ortlab.analysis.placement.whatifresult import WhatIfResult
    from ortlab.analysis.profiling import ProfileResult, parse_profile, parse_profile_file, profile
    from ortlab.analysis.quantization.compare import CompareResult, compare
    from ortlab.analysis.quantization.error import ErrorResult, quantization_error
    from ortlab.analysis.quantization.quantize import quantize, to_fp16
    from ortlab.analysis.soak import SoakResult, soak
    from ortlab.analysis.sweep import SweepResult, sweep
    from ortlab.analysis.throughput import ConcurrencyError, ThroughputResult, throughput
    from ortlab.analysis.versions import VersionDiffResult, version_diff
    from ortlab.core.config import SessionConfig
    from ortlab.core.decoder import DecoderInfo
    from ortlab.core.errors import (
        ExternalDataError,
        FeedError,
        InvalidModelError,
        OrtlabError,
        OrtlabWarning,
        ProfileParseError,
        ProviderError,
        ProviderFallbackError,
        ProviderFallbackWarning,
        QuantizationError,
        RunError,
        SessionConfigError,
        SessionCreationError,
        UnsupportedModelError,
        VersionInstallError,
        WorkerCancelledError,
        WorkerCrashedError,
        WorkerError,
        WorkerTimeoutError,
    )
    from ortlab.core.inputs import Feeds
    from ortlab.core.model import Model, ModelLike, ModelSummary, load, without_initializer_inputs
    from ortlab.core.quantconfig import QuantConfig
    from ortlab.core.stats import Verdict, paired_ratio
    from ortlab.core.version import __version__
    from ortlab.core.workshop import copy_notebooks
    from ortlab.diagnosis.best import Best
    from ortlab.diagnosis.doctor import DoctorResult, doctor
    from ortlab.diagnosis.facts import Finding
    from ortlab.engine import examples
    from ortlab.engine.calls import Reach
    from ortlab.engine.providers import Providers, devices, providers
    from ortlab.engine.session import SessionReport
    from ortlab.engine.worker import set_isolation
    from ortlab.views.frames import styled
    from ortlab.views.modelexplorer import NodeDataExport
    from ortlab.views.report import report

    del _views

    # every measuring verb's result carries its record (the machine, the runtime and its
    # settings, the model file, the inputs: docs/records.md), written into its JSON
    from ortlab.analysis.provenance import recorded as _recorded

    benchmark = _recorded(benchmark)
    compare_configs = _recorded(compare_configs)
    profile = _recorded(profile)
    placement = _recorded(placement)
    whatif = _recorded(whatif)
    diverge = _recorded(diverge)
    generate = _recorded(generate)
    llm_bench = _recorded(llm_bench)
    kl_divergence = _recorded(kl_divergence)
    cost = _recorded(cost)
    roofline = _recorded(roofline)
    footprint = _recorded(footprint)
    ablate_optimizers = _recorded(ablate_optimizers)
    optimization_diff = _recorded(optimization_diff)
    transformer_optimize = _recorded(transformer_optimize)
    compare = _recorded(compare)
    quantization_error = _recorded(quantization_error)
    soak = _recorded(soak)
    sweep = _recorded(sweep)
    throughput = _recorded(throughput)
    version_diff = _recorded(version_diff)
    doctor = _recorded(doctor)
    del _recorded

if TYPE_CHECKING:
    from ortlab.views.graph.widget import GraphView
    from ortlab.views.lab.lab import Lab
    from ortlab.views.widgets.diff import GraphDiff
    from ortlab.views.widgets.netron import NetronView


def graph(
    model: ModelLike,
    placement: PlacementResult | None = None,
    profile: ProfileResult | None = None,
    error: ErrorResult | DivergenceResult | None = None,
    diff: DiffResult | VersionDiffResult | None = None,
    *,
    roofline: RooflineResult | None = None,
    **options: Any,
) -> GraphView:
    """The graph view of ``model`` with the runtime facts given (imports the widget library
    on first use). ``diff=ortlab.diff(a, b)`` (or an ``ortlab.version_diff``): nodes coloured
    by B - A (``color_by='diff'``); ``roofline=ortlab.roofline(model, config)``: by each node's
    share of its bound (``color_by='roofline'``; pass ``placement=`` of the same config to map
    fused kernels back to their nodes); ``error=ortlab.quantization_error(...)`` or
    ``error=ortlab.diverge(...)``: nodes coloured by their output's error (SQNR, dB) and a
    divergence's first node highlighted; else by time when measured on one EP, by provider when
    nodes ran on two or more."""
    from ortlab.core import gcpause
    from ortlab.views.graph.widget import GraphView, error_options

    if isinstance(diff, VersionDiffResult):
        diff = diff.as_diff()

    with gcpause.held():  # a big graph is many small objects, all kept (see core.gcpause)
        data = graph_data(
            model, placement=placement, profile=profile, error=error, diff=diff, roofline=roofline
        )
        if isinstance(error, DivergenceResult):  # the error is the question: colour by it
            options = error_options(error.first.node if error.first else None) | options
        return GraphView(data, **options)


def model_explorer_data(
    model: ModelLike,
    path: str | _os.PathLike[str],
    figure: str = "time",
    *,
    placement: PlacementResult | None = None,
    profile: ProfileResult | None = None,
    error: ErrorResult | DivergenceResult | None = None,
    diff: DiffResult | None = None,
    roofline: RooflineResult | None = None,
) -> NodeDataExport:
    """Write one per-node figure of ``model`` as Model Explorer's node-data JSON at ``path``:
    ``figure`` is 'time' (µs per run) or 'share' (from ``placement`` or ``profile``),
    'provider' (``placement``), 'error' (SQNR, dB: ``error=ortlab.diverge(...)`` or a
    quantization error), 'diff' (``diff``) or 'roofline' (``roofline``). The values are those
    :func:`graph` draws. Open it in Model Explorer beside the model (its ONNX adapter,
    ``model-explorer-onnx``): ``model-explorer model.onnx --node_data_paths=PATH``."""
    from ortlab.views.modelexplorer import save_node_data

    m = load(model)
    data = graph_data(
        m, placement=placement, profile=profile, error=error, diff=diff, roofline=roofline
    )
    named = {n.name for n in m.proto.graph.node if n.name}
    return save_node_data(data, figure, m.proto.graph.name, named, path)


def graph_diff(opt: OptimizationResult, a: str = "disabled", b: str = "all") -> GraphDiff:
    """Two linked graph views of an optimization diff: what each node became at level ``b``."""
    from ortlab.views.widgets.diff import graph_diff as _diff

    return _diff(opt, a, b)


def netron(model: Model | str, height: int = 700) -> NetronView:
    """Netron on 127.0.0.1, embedded (the raw model; no runtime data). ``.stop()`` ends it."""
    from ortlab.views.widgets.netron import netron as _netron

    return _netron(model, height=height)


_UI_CLASSES = {"Lab": "ortlab.views.lab.lab", "GraphView": "ortlab.views.graph.widget"}


def __getattr__(name: str) -> Any:
    """``ortlab.Lab`` and ``ortlab.GraphView`` are the widget classes themselves (so
    ``isinstance(x, ortlab.Lab)`` works), imported on first access: ``import ortlab`` loads no
    UI library."""
    if name in _UI_CLASSES:
        import importlib

        return getattr(importlib.import_module(_UI_CLASSES[name]), name)
    raise AttributeError(f"module 'ortlab' has no attribute {name!r}")


__all__ = [
    "AblationResult",
    "BenchmarkResult",
    "Best",
    "CompareResult",
    "ConcurrencyError",
    "ConfigComparison",
    "CostResult",
    "DecoderInfo",
    "DiffResult",
    "DivergenceResult",
    "DoctorResult",
    "ErrorResult",
    "ExternalDataError",
    "FeedError",
    "Feeds",
    "Finding",
    "FootprintResult",
    "GenerationResult",
    "GraphData",
    "GraphView",
    "InvalidModelError",
    "KLDResult",
    "LLMBenchResult",
    "Lab",
    "MergeResult",
    "Model",
    "ModelSummary",
    "NodeDataExport",
    "OptimizationResult",
    "OrtlabError",
    "OrtlabWarning",
    "PlacementResult",
    "ProfileParseError",
    "ProfileResult",
    "ProviderError",
    "ProviderFallbackError",
    "ProviderFallbackWarning",
    "Providers",
    "QuantConfig",
    "QuantizationError",
    "Reach",
    "RooflineResult",
    "RunError",
    "RunSummary",
    "SessionConfig",
    "SessionConfigError",
    "SessionCreationError",
    "SessionReport",
    "SoakResult",
    "Spec",
    "SweepResult",
    "ThroughputResult",
    "TransformerOptResult",
    "UnsupportedModelError",
    "Verdict",
    "VersionDiffResult",
    "VersionInstallError",
    "WhatIfResult",
    "WorkerCancelledError",
    "WorkerCrashedError",
    "WorkerError",
    "WorkerTimeoutError",
    "__version__",
    "ablate_optimizers",
    "benchmark",
    "compare",
    "compare_configs",
    "copy_notebooks",
    "cost",
    "devices",
    "diff",
    "diverge",
    "doctor",
    "examples",
    "footprint",
    "generate",
    "graph",
    "graph_data",
    "graph_diff",
    "kl_divergence",
    "llm_bench",
    "load",
    "merge",
    "model_explorer_data",
    "netron",
    "optimization_diff",
    "paired_ratio",
    "parse_profile",
    "parse_profile_file",
    "placement",
    "profile",
    "providers",
    "quantization_error",
    "quantize",
    "read_spec",
    "report",
    "roofline",
    "run_spec",
    "set_isolation",
    "soak",
    "styled",
    "sweep",
    "throughput",
    "to_fp16",
    "transformer_optimize",
    "version_diff",
    "whatif",
    "without_initializer_inputs",
]
