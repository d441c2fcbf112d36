"""What the onnxruntime build can do (its version, the IR and opset limits, the devices it
sees, its execution providers and plugin EPs), as data. ORT runs only in the engine's worker:
``ortlab.engine.runtime`` measures these facts there and registers itself here on import, so the
core (a model's ``summary.problems``, the environment a result records) and the views read them
without importing onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortlab.core.config import SessionConfig

__all__ = [
    "PROFILER_OVERHEAD",
    "PROFILER_US_PER_NODE",
    "Device",
    "PluginEP",
    "Providers",
    "RuntimeLimits",
    "limits",
    "ort_version",
    "set_source",
    "timed_spin",
]


PROFILER_US_PER_NODE = 6
"""What ORT's profiler adds to a run per executed node, µs: measured by
``benchmarks/profiler_overhead.py`` (plain onnxruntime, profiler on against off, interleaved:
6.0 to 7.7 µs per node on the bundled MLP, residual CNN and BERT, AMD EPYC, ORT 1.31.1; on
ResNet-50 it is lost in the run's own noise). Every sentence about profiled times quotes this."""
PROFILER_OVERHEAD = (
    f"ORT's profiler adds about {PROFILER_US_PER_NODE} µs per executed node (measured: "
    "benchmarks/results/profiler_overhead.md), which weighs on tiny nodes"
)
"""The sentence that says it."""


@dataclass(frozen=True)
class RuntimeLimits:
    ort_version: str
    max_ir_version: int
    max_opset: dict[str, int]
    """Highest opset ORT accepts per domain ('' is ai.onnx)."""


@dataclass(frozen=True)
class Device:
    """A real device an execution provider can use, from ``ort.get_ep_devices()``."""

    ep_name: str
    ep_vendor: str
    device_type: str
    device_vendor: str
    device_id: int
    metadata: dict[str, str]


@dataclass(frozen=True)
class PluginEP:
    """A plugin EP package as the worker registered it (``ortlab.engine.plugins``)."""

    name: str
    """The EP's name as ORT knows it (``QNNExecutionProvider``)."""
    module: str
    version: str
    library: str
    error: str = ""
    """Why registration failed, or ''."""
    devices: list[str] = field(default_factory=list)
    """Device types it listed after registration (``CPU``, ``GPU``, ``NPU``)."""


@dataclass(frozen=True)
class Providers:
    """The execution providers of the onnxruntime ortlab runs (the worker's), as
    ``ortlab.providers()`` and ``ortlab providers`` show them."""

    ort_version: str
    in_build: tuple[str, ...]
    """``ort.get_available_providers()`` once the plugin EPs are registered."""
    loadable: tuple[str, ...]
    """Those a trial session really loaded here, best first (what ``providers='auto'`` takes)."""
    reasons: tuple[str, ...]
    """Why each was taken or not."""
    plugins: tuple[PluginEP, ...]
    devices: tuple[Device, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "onnxruntime": self.ort_version,
            "in_build": list(self.in_build),
            "loadable": list(self.loadable),
            "reasons": list(self.reasons),
            "plugins": [asdict(p) for p in self.plugins],
            "devices": [asdict(d) for d in self.devices],
        }


_source: Callable[[], RuntimeLimits] | None = None


def set_source(source: Callable[[], RuntimeLimits]) -> None:
    """Where :func:`limits` comes from (``ortlab.engine.runtime`` registers its worker call)."""
    global _source  # noqa: PLW0603 - one source per process, set by the engine on import
    _source = source


def limits() -> RuntimeLimits:
    """The newest IR version and opsets this onnxruntime accepts, measured in the worker."""
    if _source is None:  # `import ortlab` imports the engine, which registers it
        raise RuntimeError("import ortlab.engine first: it measures the runtime's limits")
    return _source()


TIMED_SPIN = (1, 31, 1)
"""The first onnxruntime whose thread pool honours ``session.intra_op.spin_duration_us`` (PR
#27916): an older one ignores the entry without a word."""
TIMED_SPIN_US = 1000
"""The spin the doctor tries: 1 ms (onnxruntime's PR measured 500-2000 µs as typical)."""


def has_timed_spin(version: str | None = None) -> bool:
    """Whether ``version`` (the worker's onnxruntime by default) has time-bounded spinning."""
    text = ort_version() if version is None else version
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= TIMED_SPIN


def timed_spin(cfg: SessionConfig) -> SessionConfig | None:
    """``cfg`` with spinning bounded in time (the middle way between ORT's default and off),
    where the runtime has it and ``cfg`` spins without a bound; else None."""
    if cfg.allow_spinning is False or cfg.spin_duration_us is not None or not has_timed_spin():
        return None
    return cfg.with_(spin_duration_us=TIMED_SPIN_US)


def ort_version() -> str:
    """The version of the onnxruntime that runs ortlab's sessions (the worker's)."""
    return limits().ort_version
