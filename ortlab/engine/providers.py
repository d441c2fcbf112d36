"""The caller's side of onnxruntime's facts: what the build is and can do, measured where ORT
runs (the worker) and remembered per process. :func:`providers` (``ortlab.providers()``,
``ortlab providers``): the providers in the build, which of them really load (a trial session
each), the plugin EPs and the devices ORT sees once they are registered; :func:`limits`: the IR
and opset limits, which importing this module registers as the core's source
(``ortlab.core.runtime``, read by a model's ``summary.problems``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from ortlab.core import runtime as _core
from ortlab.core.run import Progress
from ortlab.core.runtime import Device, Providers, RuntimeLimits
from ortlab.engine.runtime import measure_limits
from ortlab.engine.worker import serving

__all__ = ["Providers", "devices", "limits", "measure_providers", "providers"]

_TIMEOUT_S = 120.0

R = TypeVar("R")


def measure_providers(progress: Progress | None = None) -> Providers:  # noqa: ARG001 - task signature
    """(worker task) The providers in the build, those that load, the plugins and devices."""
    import onnxruntime as ort

    from ortlab.engine.plugins import registered
    from ortlab.engine.runtime import measure_devices
    from ortlab.engine.session import auto_providers

    plugins = registered()
    loadable, reasons = auto_providers()
    return Providers(
        ort_version=str(ort.__version__),
        in_build=tuple(ort.get_available_providers()),
        loadable=tuple(loadable),
        reasons=tuple(reasons),
        plugins=plugins,
        devices=tuple(measure_devices()),
    )


def _measured(task: Callable[..., R]) -> R:
    """A ``measure_*`` task's answer, from the worker (where ORT runs)."""
    from ortlab.engine.worker import in_worker

    return in_worker(task, {}, timeout=_TIMEOUT_S, context="onnxruntime's facts")


def limits() -> RuntimeLimits:
    """The newest IR version and opsets this onnxruntime accepts (measured once per process
    and per onnxruntime serving it: :func:`ortlab.engine.worker.using`)."""
    return _limits(serving())


@functools.cache
def _limits(_python: str) -> RuntimeLimits:
    return _measured(measure_limits)


def providers() -> Providers:
    """The execution providers onnxruntime has here: in the build, really loading (a trial
    session each, in the worker), plugin EPs, and the devices ORT sees (measured once per
    process and per onnxruntime serving it)."""
    return _providers(serving())


@functools.cache
def _providers(_python: str) -> Providers:
    return _measured(measure_providers)


def devices() -> list[Device]:
    """The real devices ORT sees once the plugin EPs are registered (not the build's list)."""
    return list(providers().devices)


_core.set_source(limits)
