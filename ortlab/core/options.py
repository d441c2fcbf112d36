"""The one translation of a :class:`~ortlab.core.config.SessionConfig` into onnxruntime's own
options. :func:`ort_options` is pure data: :mod:`ortlab.engine.session` applies it to a real
``SessionOptions``, and every plain-onnxruntime snippet ortlab prints (``SessionConfig.snippet``,
the doctor's best, the Lab's history) is written from the same object, so the code a user copies
builds exactly the session ortlab measured."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortlab.core.config import LEVELS, SessionConfig
from ortlab.core.eps import PLUGIN_EPS, POLICIES, split_device

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["DeviceChoice", "Enum", "OrtOptions", "ort_options"]


@dataclass(frozen=True)
class DeviceChoice:
    """One requested EP selected by device: ``add_provider_for_devices`` with the devices of
    ``ep`` (of ``device`` type when given) and its options."""

    ep: str
    device: str | None
    options: dict[str, str]
    module: str
    """The plugin package that registers the EP ('' for ORT's own, e.g. the CPU EP)."""


@dataclass(frozen=True)
class Enum:
    """An onnxruntime enum value by name (``ort.GraphOptimizationLevel.ORT_ENABLE_ALL``)."""

    enum: str
    name: str

    def resolve(self, ort: ModuleType) -> object:
        return getattr(getattr(ort, self.enum), self.name)

    def __str__(self) -> str:
        return f"ort.{self.enum}.{self.name}"


@dataclass(frozen=True)
class OrtOptions:
    """A SessionConfig in ORT's words: what to set on ``SessionOptions`` and how to create the
    session."""

    attributes: list[tuple[str, Any, bool]]
    """(``SessionOptions`` attribute, value, is ORT's default) in the order they are set."""
    free_dims: list[tuple[str, int]]
    """``add_free_dimension_override_by_name`` calls."""
    entries: dict[str, str]
    """``add_session_config_entry`` calls (spinning included)."""
    libraries: list[str]
    """``register_custom_ops_library`` calls."""
    providers: list[str | tuple[str, dict[str, str]]] | str
    """The ``providers=`` argument, or ``"auto"``."""
    io_binding: bool = False
    notes: list[str] = field(default_factory=list)
    policy: str = ""
    """ORT's device selection policy (``PREFER_NPU``…): set it and name no providers."""
    devices: list[DeviceChoice] = field(default_factory=list)
    """EPs selected by device (plugin EPs, ``ep:DEVICE`` names), in order; when none of them
    has a device here, the session runs on the CPU EP's devices."""


def ort_options(
    config: SessionConfig,
    extra_entries: dict[str, str] | None = None,
    *,
    plugin_eps: Mapping[str, str] | None = None,
    resolved: list[str] | None = None,
) -> OrtOptions:
    """``plugin_eps``: the plugin EPs registered, with their modules (default: those ortlab
    knows by name);
    ``resolved``: the providers ``auto`` chose in the worker, when known."""
    mode = "ORT_PARALLEL" if config.execution_mode == "parallel" else "ORT_SEQUENTIAL"
    attributes: list[tuple[str, Any, bool]] = [
        (
            "graph_optimization_level",
            Enum("GraphOptimizationLevel", LEVELS[config.level]),
            False,
        ),  # always written: the level is the first thing a reader looks for
        ("intra_op_num_threads", config.intra_op_threads, config.intra_op_threads == 0),
        ("inter_op_num_threads", config.inter_op_threads, config.inter_op_threads == 0),
        ("execution_mode", Enum("ExecutionMode", mode), mode == "ORT_SEQUENTIAL"),
        ("enable_mem_pattern", config.enable_mem_pattern, config.enable_mem_pattern),
        ("enable_cpu_mem_arena", config.enable_cpu_mem_arena, config.enable_cpu_mem_arena),
    ]
    entries = dict(config.config_entries)
    if config.allow_spinning is not None:
        flag = "1" if config.allow_spinning else "0"
        entries["session.intra_op.allow_spinning"] = flag
        entries["session.inter_op.allow_spinning"] = flag
    if config.spin_duration_us is not None:
        entries["session.intra_op.spin_duration_us"] = str(config.spin_duration_us)
    if config.disabled_optimizers:
        entries["optimization.disable_specified_optimizers"] = ",".join(config.disabled_optimizers)
    entries.update(extra_entries or {})
    names = list(resolved) if config.providers == "auto" and resolved else config.providers
    providers: list[str | tuple[str, dict[str, str]]] | str = (
        "auto"
        if names == "auto"
        else [(p, config.options_for(p)) if config.options_for(p) else p for p in names]
    )
    plugins = dict(PLUGIN_EPS) if plugin_eps is None else dict(plugin_eps)
    devices: list[DeviceChoice] = []
    if not config.policy and names != "auto":
        split = [split_device(p) for p in names]
        if any(ep in plugins or device for ep, device in split):
            devices = [
                DeviceChoice(ep, device, dict(config.options_for(p)), plugins.get(ep, ""))
                for p, (ep, device) in zip(names, split, strict=True)
            ]
    return OrtOptions(
        attributes=attributes,
        free_dims=list(config.free_dimension_overrides),
        entries=entries,
        libraries=list(config.custom_op_libraries),
        providers=providers,
        io_binding=config.io_binding,
        policy=POLICIES[config.policy] if config.policy else "",
        devices=devices,
    )
