"""Sessions that tell the truth: build an InferenceSession and report what really happened.

ORT silently drops an execution provider that cannot load (asked for CUDA on a machine without
it: no exception, ``get_providers()`` just lacks it). We capture ORT's own output during session
creation at the fd level, compare requested against active providers, and put the fallback and
ORT's stated reason into a :class:`SessionReport`. onnxruntime is imported inside functions so a
saved report reopens on a machine without it.
"""

from __future__ import annotations

import functools
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from ortlab._result import Result
from ortlab.capture import capture_output
from ortlab.config import PROVIDER_ALIASES, SessionConfig, _short
from ortlab.errors import (
    ExternalDataError,
    ProviderFallbackError,
    ProviderFallbackWarning,
    SessionConfigError,
    SessionCreationError,
    UnsupportedModelError,
)
from ortlab.runtime import Device

__all__ = ["ProviderIssue", "SessionReport", "build_session", "clean_ort_message"]

_INSTALL_HINTS = {
    "CUDAExecutionProvider": "Install the CUDA and cuDNN versions this onnxruntime-gpu needs "
    "(named above) on a machine with an NVIDIA GPU, or drop 'cuda'.",
    "TensorrtExecutionProvider": "Install TensorRT (libnvinfer) and CUDA matching this "
    "onnxruntime-gpu, or drop 'trt'.",
    "OpenVINOExecutionProvider": "pip install onnxruntime-openvino, in its own environment "
    "(it conflicts with onnxruntime and onnxruntime-gpu).",
    "DmlExecutionProvider": "DirectML needs Windows and pip install onnxruntime-directml.",
    "CoreMLExecutionProvider": "CoreML needs macOS and the standard onnxruntime wheel.",
    "QNNExecutionProvider": "QNN needs a Qualcomm device and pip install onnxruntime-qnn.",
    "ROCMExecutionProvider": "ROCm needs an AMD GPU and an onnxruntime build with ROCm.",
    "MIGraphXExecutionProvider": "MIGraphX needs an AMD GPU and onnxruntime-migraphx.",
}
_KEYWORDS = {
    "CUDAExecutionProvider": ("cuda", "cublas", "cudnn", "libcu"),
    "TensorrtExecutionProvider": ("tensorrt", "nvinfer", "trt"),
    "OpenVINOExecutionProvider": ("openvino",),
}
_LOG_PREFIX = re.compile(r"^\S+ \S+ \[[EWIV]:onnxruntime:[^\]]*\] ?")
_QUIET = re.compile(r"^\S+ \S+ \[[IV]:onnxruntime")
_INIT_AS_INPUT = re.compile(r"Initializer (\S+) appears in graph inputs")


@dataclass(frozen=True)
class ProviderIssue:
    provider: str
    reason: str


@dataclass(frozen=True)
class SessionReport(Result):
    """What ORT did when building the session: providers, fallbacks, its own words."""

    requested: list[str]
    active: list[str]
    """``session.get_providers()``: the providers the session really has."""
    missing: list[ProviderIssue]
    """Requested providers that did not load, each with ORT's reason."""
    level: str
    create_ms: float
    ort_version: str
    log: list[str] = field(default_factory=list)
    """ORT's own output during creation (fd level), ANSI removed, repeats summarised."""
    notes: list[str] = field(default_factory=list)
    auto_reasons: list[str] = field(default_factory=list)
    """When providers='auto': why each provider was picked or passed over."""
    devices: list[Device] = field(default_factory=list)
    placements: dict[str, str] = field(default_factory=dict)
    """From ORT's verbose "Node placements" block (only when built with log_severity=0)."""
    fired: dict[str, int] = field(default_factory=dict)
    """Graph transformers that modified the graph (only when built with log_severity<=1)."""

    @property
    def fallback(self) -> bool:
        return bool(self.missing)

    def summary(self) -> str:
        text = f"runs on {', '.join(_short(p) for p in self.active)}"
        if self.missing:
            text += "; did not load: " + "; ".join(
                f"{_short(m.provider)} ({m.reason})" for m in self.missing
            )
        return text

    def __repr__(self) -> str:
        return f"<SessionReport {self.summary()}; created in {self.create_ms:.1f} ms>"


def clean_ort_message(text: str) -> str:
    """ORT's message without ``[ONNXRuntimeError] : 1 : FAIL :`` and ``file.cc:12 Func(…)``."""
    msg = str(text).strip()
    for _ in range(2):  # the two prefixes come in either order
        msg = re.sub(r"^(?:EP Error\s*)?\[ONNXRuntimeError\] : \d+ : \w+ : ", "", msg)
        msg = re.sub(r"^EP Error\s*", "", msg)
        m = re.match(r"^\S+\.(?:cc|h|cpp|hpp):\d+ ", msg)
        if m:
            msg = _drop_signature(msg[m.end() :])
    msg = re.sub(r"Failed to load library (?:\S*/)?(\S+) with error: ", r"Failed to load \1: ", msg)
    msg = re.sub(r"\s*Please install all dependencies.*?supported\.", "", msg)
    return msg.strip()


def _drop_signature(rest: str) -> str:
    """``Func(a, b(c)) message`` -> ``message`` (balanced parentheses)."""
    paren = rest.find("(")
    if not 0 <= paren < 200:
        return rest
    depth = 0
    for i in range(paren, len(rest)):
        depth += {"(": 1, ")": -1}.get(rest[i], 0)
        if depth == 0:
            return rest[i + 1 :].strip()
    return rest


def _summarise_log(lines: list[str]) -> tuple[list[str], list[str]]:
    """Collapse ORT's one-warning-per-initializer flood into one note."""
    kept: list[str] = []
    init_inputs: list[str] = []
    for raw in lines:
        line = _LOG_PREFIX.sub("", raw).strip()
        hit = _INIT_AS_INPUT.search(line)
        if hit:
            init_inputs.append(hit.group(1))
            continue
        kept.append(line)
    notes = []
    if init_inputs:
        notes.append(
            f"ORT warned that {len(init_inputs)} initializers (e.g. {init_inputs[0]}) also appear "
            "as graph inputs: with IR >= 4 it treats them as overridable inputs and does not "
            "constant-fold or fuse them. Remove them from graph.input to let ORT optimize."
        )
    return kept[:200], notes


_PLACED_ON = re.compile(r"Node\(s\) placed on \[(\w+)\]")
_PLACED_NODE = re.compile(r"^\s*(\S+) \((.*)\)\s*$")


def parse_placements(lines: list[str]) -> dict[str, str]:
    """ORT's verbose "Node placements" block -> {node name: execution provider}.

    ORT lists per-node lines only when more than one EP is used (and Memcpy nodes)."""
    out: dict[str, str] = {}
    current = None
    inside = False
    for raw in lines:
        line = _LOG_PREFIX.sub("", raw)
        if "Node placements" in line:
            inside, current = True, None
            continue
        if not inside:
            continue
        hit = _PLACED_ON.search(line)
        if hit:
            current = hit.group(1)
            continue
        node = _PLACED_NODE.match(line)
        if node and current and line.startswith("  "):
            out[node.group(2)] = current
        elif line.strip() and not line.startswith(" "):
            inside = False
    return out


_FIRED = re.compile(r"GraphTransformer (\S+) modified: (\d+)")


def parse_fired(lines: list[str]) -> dict[str, int]:
    """ORT's INFO lines ``GraphTransformer X modified: 1`` -> {transformer: times it fired}."""
    out: dict[str, int] = {}
    for line in lines:
        hit = _FIRED.search(line)
        if hit and hit.group(2) != "0":
            out[hit.group(1)] = out.get(hit.group(1), 0) + 1
    return out


def _reason(provider: str, lines: list[str], warns: list[str], available: list[str]) -> str:
    if provider not in available:
        hint = _INSTALL_HINTS.get(provider, "Install an onnxruntime package that includes it.")
        return f"not part of this onnxruntime build (it has {', '.join(available)}). {hint}"
    keys = (provider.lower(), *_KEYWORDS.get(provider, ()))
    relevant = [
        _LOG_PREFIX.sub("", ln).strip()
        for ln in [*lines, *warns]
        if any(k in ln.lower() for k in keys) and "*** EP Error ***" not in ln
    ]
    said = " ".join(dict.fromkeys(clean_ort_message(r) for r in relevant[:3])) or "no reason"
    return f"ORT said: {said[:400]} {_INSTALL_HINTS.get(provider, '')}".strip()


def _ort_level(level: str) -> Any:
    import onnxruntime as ort

    from ortlab.config import LEVELS

    name = LEVELS[level]
    if not hasattr(ort.GraphOptimizationLevel, name):
        raise SessionCreationError(
            f"Optimization level {level!r} ({name}) is not in onnxruntime {ort.__version__}; "
            "use 'extended' or 'all'."
        )
    return getattr(ort.GraphOptimizationLevel, name)


def session_options(
    config: SessionConfig,
    *,
    profile_prefix: str | None = None,
    log_severity: int = 2,
    optimized_model_path: str | None = None,
    extra_entries: dict[str, str] | None = None,
) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = _ort_level(config.level)
    so.intra_op_num_threads = config.intra_op_threads
    so.inter_op_num_threads = config.inter_op_threads
    so.execution_mode = (
        ort.ExecutionMode.ORT_PARALLEL
        if config.execution_mode == "parallel"
        else ort.ExecutionMode.ORT_SEQUENTIAL
    )
    so.enable_mem_pattern = config.enable_mem_pattern
    so.enable_cpu_mem_arena = config.enable_cpu_mem_arena
    so.log_severity_level = log_severity
    for name, value in config.free_dimension_overrides:
        so.add_free_dimension_override_by_name(name, value)
    entries = dict(config.config_entries)
    if config.allow_spinning is not None:
        entries["session.intra_op.allow_spinning"] = "1" if config.allow_spinning else "0"
        entries["session.inter_op.allow_spinning"] = "1" if config.allow_spinning else "0"
    entries.update(extra_entries or {})
    for key, text in entries.items():
        so.add_session_config_entry(key, text)
    for lib in config.custom_op_libraries:
        try:
            so.register_custom_ops_library(lib)
        except Exception as err:  # ORT's own Fail: the library is missing or not loadable
            raise SessionConfigError(
                f"Custom-op library {lib!r} could not be registered: {clean_ort_message(str(err))}"
                ". Check the path (absolute, built for this onnxruntime version and platform) or "
                "drop it from custom_op_libraries."
            ) from err
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_model_path:
        so.optimized_model_filepath = optimized_model_path
    return so


def _classify_failure(message: str, model_name: str, config: SessionConfig) -> Exception:
    where = f"{model_name!r} with {config.label()}"
    if "escapes model directory" in message or "outside the directory" in message:
        return ExternalDataError(f"Refusing to load {where}: {message}")
    if "Unsupported model IR version" in message or (
        "opset" in message.lower()
        and ("not supported" in message or "under development" in message)
    ):
        return UnsupportedModelError(f"onnxruntime cannot run {where}: {message}")
    if "No Op registered" in message or "Could not find an implementation" in message:
        return UnsupportedModelError(
            f"onnxruntime has no kernel for an op in {where}: {message}. If it is a custom op, "
            "register its library with SessionConfig(custom_op_libraries=[...])."
        )
    return SessionCreationError(f"ORT could not create a session for {where}: {message}")


def build_session(
    model_path: str,
    config: SessionConfig,
    *,
    model_name: str = "model",
    profile_prefix: str | None = None,
    log_severity: int = 2,
    optimized_model_path: str | None = None,
    extra_entries: dict[str, str] | None = None,
) -> tuple[Any, SessionReport]:
    """Create the session and its :class:`SessionReport` (runs in the worker)."""
    import onnxruntime as ort

    from ortlab.runtime import devices

    auto_reasons: list[str] = []
    if config.providers == "auto":
        requested, auto_reasons = auto_providers()
    else:
        requested = list(config.providers)
    providers: list[Any] = [
        (p, config.options_for(p)) if config.options_for(p) else p for p in requested
    ]
    so = session_options(
        config,
        profile_prefix=profile_prefix,
        log_severity=log_severity,
        optimized_model_path=optimized_model_path,
        extra_entries=extra_entries,
    )
    start = time.perf_counter()
    try:
        with capture_output() as cap:
            sess = ort.InferenceSession(model_path, so, providers=providers)
    except Exception as err:
        raise _classify_failure(clean_ort_message(str(err)), model_name, config) from err
    create_ms = (time.perf_counter() - start) * 1e3
    active = list(sess.get_providers())
    available = list(ort.get_available_providers())
    lines = cap.lines()
    missing = [
        ProviderIssue(p, _reason(p, lines, cap.warnings, available))
        for p in requested
        if p not in active
    ]
    loud = [ln for ln in lines if not _QUIET.match(ln)]  # drop INFO/VERBOSE chatter
    log, notes = _summarise_log([clean_ort_message(_LOG_PREFIX.sub("", ln)) for ln in loud])
    report = SessionReport(
        requested=requested,
        active=active,
        missing=missing,
        level=config.level,
        create_ms=create_ms,
        ort_version=str(ort.__version__),
        log=log + [w for w in cap.warnings if "not in available provider" not in w],
        notes=notes,
        auto_reasons=auto_reasons,
        devices=devices(),
        placements=parse_placements(lines),
        fired=parse_fired(lines),
    )
    _enforce_fallback_policy(report, config, model_name)
    return sess, report


def _fallback_text(report: SessionReport, name: str) -> str:
    return (
        f"Execution provider(s) {[_short(m.provider) for m in report.missing]} did not load for "
        f"{name!r}: the session runs on {report.active}. "
        + " ".join(f"{_short(m.provider)}: {m.reason}" for m in report.missing)
    )


def _enforce_fallback_policy(report: SessionReport, config: SessionConfig, name: str) -> None:
    """fallback='error' raises where the session is built (in the worker)."""
    if report.missing and config.fallback == "error":
        raise ProviderFallbackError(
            _fallback_text(report, name) + " (fallback='error' in the SessionConfig.)"
        )


def warn_if_fallback(report: SessionReport, config: SessionConfig, name: str) -> None:
    """fallback='warn' warns in the *caller's* process, where the user sees it."""
    if report.missing and config.fallback == "warn":
        warnings.warn(_fallback_text(report, name), ProviderFallbackWarning, stacklevel=3)


_AUTO_ORDER = (
    "NvTensorRTRTXExecutionProvider",
    "TensorrtExecutionProvider",
    "CUDAExecutionProvider",
    "ROCMExecutionProvider",
    "MIGraphXExecutionProvider",
    "DmlExecutionProvider",
    "CoreMLExecutionProvider",
    "QNNExecutionProvider",
    "OpenVINOExecutionProvider",
    "DnnlExecutionProvider",
    "VitisAIExecutionProvider",
    "XnnpackExecutionProvider",
)


@functools.cache
def _auto_cached() -> tuple[tuple[str, ...], tuple[str, ...]]:
    import onnxruntime as ort

    from ortlab.runtime import _probe_model

    available = list(ort.get_available_providers())
    chosen: list[str] = []
    reasons: list[str] = []
    probe = _probe_model(8, 13)
    for ep in _AUTO_ORDER:
        if ep not in available:
            continue
        so = ort.SessionOptions()
        so.log_severity_level = 3
        with capture_output() as cap:
            try:
                got = ort.InferenceSession(probe, so, providers=[ep, "CPUExecutionProvider"])
                loaded = ep in got.get_providers()
            except Exception:  # noqa: BLE001 - a failing trial means "cannot load"
                loaded = False
        if loaded:
            chosen.append(ep)
            reasons.append(f"{_short(ep)}: in this build and a trial session loaded it")
        else:
            why = _reason(ep, cap.lines(), cap.warnings, available)
            reasons.append(f"{_short(ep)}: in this build but cannot load here ({why})")
    chosen.append("CPUExecutionProvider")
    reasons.append("cpu: always available, takes every node the others do not")
    skipped = [
        _short(p) for p in _AUTO_ORDER if p not in available and p in PROVIDER_ALIASES.values()
    ]
    if skipped:
        reasons.append(f"not in this build: {', '.join(skipped)}")
    return tuple(chosen), tuple(reasons)


def auto_providers() -> tuple[list[str], list[str]]:
    """The providers that really load here, best first, with the reason for each choice."""
    chosen, reasons = _auto_cached()
    return list(chosen), list(reasons)
