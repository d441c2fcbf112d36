"""The Lab's runs without a widget: what a Lab run computes, given what its controls say.

A :class:`Choice` is the controls' state (session config, model variant, dims, runs); a
:class:`LabRunner` turns it into a :class:`LabRun`: the variant built once and remembered
(per variant, per-channel, transformers optimizer and, for static int8, the shapes it was
calibrated at), the inputs synthesized once per dims, then the placement join (profiling on)
and the benchmark (profiling off) at those inputs. The widget (``ortlab.views.lab.lab``)
only turns controls into choices and results into tabs, asking the runner for whatever needs the
engine (the dims a model runs at); scripts and tests can drive the runs directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TypedDict

from ortlab.analysis.benchmark import BenchmarkResult, benchmark_run
from ortlab.analysis.optimizers.transformers import transformer_optimize
from ortlab.analysis.placement.measure import placement_run
from ortlab.analysis.placement.result import PlacementResult
from ortlab.analysis.quantization.quantize import quantize, to_fp16
from ortlab.core.config import SessionConfig
from ortlab.core.decoderinputs import decoder_dims
from ortlab.core.inputs import DimChoice, Feeds
from ortlab.core.model import Model, load
from ortlab.core.run import Run
from ortlab.engine.calls import edge, fitted_dims
from ortlab.engine.worker import get_worker

__all__ = [
    "BEST",
    "INT8_VARIANTS",
    "VARIANTS",
    "Choice",
    "LabRun",
    "LabRunner",
    "Shapes",
    "cancel_on",
    "start_worker",
]

VARIANTS = ("none", "dynamic int8", "static QDQ", "static QOperator", "fp16", "int4 weight-only")
INT8_VARIANTS = ("dynamic int8", "static QDQ", "static QOperator")
BEST = "doctor's best: "
"""Prefix of the variant the Lab's Apply best adds: the doctor's own model file."""

Step = Callable[[str], None]
Progress = Callable[[str], Callable[[int, int], None]]


@dataclass(frozen=True)
class Choice:
    """What the Lab's controls say."""

    config: SessionConfig
    variant: str = "none"
    per_channel: bool = False
    transformers: bool = False
    dims: Mapping[str, int] | None = None
    runs: int = 30

    @property
    def variant_key(self) -> str:
        """The variant's name as History shows it (``dynamic int8 per-channel``)."""
        extra = " per-channel" if self.variant in INT8_VARIANTS and self.per_channel else ""
        return self.variant + extra


@dataclass(frozen=True)
class LabRun:
    """One run: the model it ran (a variant's file when one is chosen), the choice, the
    placement join (with its profile) and the benchmark."""

    model: Model
    choice: Choice
    placement: PlacementResult
    benchmark: BenchmarkResult


def start_worker() -> None:
    """Start the worker in the background (onnxruntime's import overlaps the caller's own
    start-up): the Lab's seam to the engine, so the views import no engine."""
    get_worker().start_in_background()


def cancel_on(flag: threading.Event) -> AbstractContextManager[None]:
    """The worker's context in which setting ``flag`` stops the call in flight (a Lab's
    Cancel)."""
    return get_worker().cancel_on(flag)


def _quiet(_what: str) -> None:
    """No step to announce."""


def _no_bar(_label: str) -> Callable[[int, int], None]:
    return lambda _d, _t: None


class Shapes(TypedDict, total=False):
    """The shapes every tab's verb runs at, as its keywords: the Lab's feeds, or its dims."""

    feeds: Feeds
    dims: Mapping[str, int] | None


class LabRunner:
    """The runs of one model (``feeds`` fix every shape; else dims choose them)."""

    def __init__(self, model: Model, feeds: Feeds | None = None) -> None:
        self.model = model
        self.feeds = feeds
        self._variants: dict[str, Model] = {}
        self._runs: dict[str, Run] = {}

    def inputs(self, dims: Mapping[str, int] | None) -> Shapes:
        """``feeds=`` or ``dims=`` for the library calls: every tab runs at the same shapes."""
        return {"feeds": self.feeds} if self.feeds is not None else {"dims": dims}

    def fitted_dims(self, dims: Mapping[str, int] | None) -> dict[str, DimChoice]:
        """The dims the model runs at for the dims box's ``dims``: a guessed image size the
        model refuses is refitted (``engine.calls.fitted_dims``); a decoder's are its roles
        (batch, prompt, past), what its inputs are made from."""
        if self.model.decoder is not None:
            return decoder_dims(self.model.signature, self.model.decoder, dims)
        return fitted_dims(self.model, dims)

    def base_run(self, model: Model, choice: Choice) -> Run:
        """The one Run a Lab's run of ``model`` starts from: the verbs' own edge (the model
        checked, the Lab's feeds validated or inputs made at ``choice.dims``, each dim resolved
        once with its reason, a guessed image size the model refuses refitted), once per model
        and shapes; a run at other settings derives from it (no second load, check or
        resolution)."""
        cfg = choice.config
        key = f"{model.fingerprint()}|{dict(choice.dims or {})!r}|{cfg.custom_op_libraries!r}"
        if key not in self._runs:  # the last one only: an image batch can be big
            dims = None if self.feeds is not None else choice.dims
            self._runs = {key: edge(model, cfg, self.feeds, dims=dims)}
        return self._runs[key].derive(config=cfg)

    def add_best(self, name: str, model: Model) -> None:
        """The doctor's own model file as the variant ``name`` (Apply best)."""
        self._variants[name] = model

    def variant_model(self, choice: Choice, step: Step = _quiet) -> Model:
        """The model a run of ``choice`` uses, built once and remembered."""
        name = choice.variant
        if name.startswith(BEST):  # Apply best: the doctor's own file, nothing rebuilt
            return self._variants[name]
        base = self.model
        if choice.transformers:  # built once: the optimizer runs in the worker
            if "transformers" not in self._variants:
                step("the transformers optimizer")
                self._variants["transformers"] = load(transformer_optimize(base).path)
            base = self._variants["transformers"]
        if name == "none":
            return base
        # a static variant is calibrated at the run's shapes: other dims, another variant
        shapes = repr(dict(choice.dims or {})) if name.startswith("static") else ""
        key = f"{choice.variant_key}|{choice.transformers}|{shapes}"
        if key not in self._variants:
            step(f"building {name}")
            self._variants[key] = self._build(base, choice)
        return self._variants[key]

    def _build(self, base: Model, choice: Choice) -> Model:
        name = choice.variant
        if name == "fp16":
            return to_fp16(base)
        if name == "int4 weight-only":  # MatMulNBits for MatMul weights; activations float
            return quantize(base, mode="int4")
        if name == "dynamic int8":
            return quantize(base, mode="dynamic", per_channel=choice.per_channel)
        if name not in ("static QDQ", "static QOperator"):
            raise ValueError(f"unknown variant {name!r}: one of {', '.join(VARIANTS)}")
        fmt = "qdq" if name == "static QDQ" else "qoperator"
        return quantize(
            base,
            mode="static",
            format=fmt,
            per_channel=choice.per_channel,
            calibration_size=8,
            **self.inputs(choice.dims),
        )

    def run(self, choice: Choice, *, step: Step = _quiet, progress: Progress = _no_bar) -> LabRun:
        """Build (or reuse) the variant, then the placement join (5 profiled runs) and the
        benchmark (``choice.runs`` runs) at the same inputs. ``step`` announces each stage,
        ``progress(stage)`` gives its progress callback."""
        model = self.variant_model(choice, step)
        run = self.base_run(model, choice)
        step("placement")
        pl = placement_run(run.with_(runs=5, warmup=2, progress=progress("placement")))
        step("the benchmark")
        b = benchmark_run(run.with_(runs=choice.runs, warmup=10, progress=progress("benchmark")))
        return LabRun(model, choice, pl, b)
