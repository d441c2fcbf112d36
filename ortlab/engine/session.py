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
from typing import TYPE_CHECKING, Any

from ortlab.core import cache
from ortlab.core.config import LEVELS, SessionConfig
from ortlab.core.eps import (
    AUTO_ORDER,
    INSTALL_HINTS,
    LOG_KEYWORDS,
    PLUGIN_PACKAGES,
    PROVIDER_ALIASES,
    split_device,
)
from ortlab.core.eps import alias as _short
from ortlab.core.errors import (
    ExternalDataError,
    ProviderFallbackError,
    ProviderFallbackWarning,
    SessionConfigError,
    SessionCreationError,
    UnsupportedModelError,
)
from ortlab.core.options import Enum, ort_options
from ortlab.core.sessionreport import ProviderIssue, SessionReport
from ortlab.engine.capture import capture_output
from ortlab.engine.plugins import PluginEP, plugin_devices, registered
from ortlab.engine.runtime import measure_devices, probe_model

if TYPE_CHECKING:
    from types import ModuleType

    import onnxruntime as ort

__all__ = ["ProviderIssue", "SessionReport", "build_session", "clean_ort_message"]

_LOG_PREFIX = re.compile(r"^\S+ \S+ \[[EWIV]:onnxruntime:[^\]]*\] ?")
_QUIET = re.compile(r"^\S+ \S+ \[[IV]:onnxruntime")
WHY_LINE = re.compile(
    r"kernel not found in registries|kernel not supported\. Fallback|Force fallback to CPU|"
    r"Force CPU execution for node|OrtNodeUnit|REASON\s*:|Operator type: .* Node name: "
)
"""Log lines that say why a node is (not) on an EP: kept whole in ``SessionReport.why_log``
for :mod:`ortlab.analysis.placement.reasons` to parse."""
_INIT_AS_INPUT = re.compile(r"Initializer (\S+) appears in graph inputs")


def clean_ort_message(text: str) -> str:
    """ORT's message without ``[ONNXRuntimeError] : 1 : FAIL :`` and ``file.cc:12 Func(…)``."""
    msg = str(text).strip()
    for _ in range(2):  # the two prefixes come in either order
        msg = re.sub(r"^(?:EP Error\s*)?\[ONNXRuntimeError\] : \d+ : \w+ : ", "", msg)
        msg = re.sub(r"^EP Error\s*", "", msg)
        m = re.match(r"^\S+\.(?:cc|h|cpp|hpp):\d+ ", msg)
        if m:
            msg = _drop_signature(msg[m.end() :])
    msg = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", msg)  # nested in another message
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


def why_lines(lines: list[str]) -> list[str]:
    """The lines of a verbose session log that give per-node verdicts, prefixes removed."""
    return [_LOG_PREFIX.sub("", ln).rstrip() for ln in lines if WHY_LINE.search(ln)]


_PLACED_ON = re.compile(r"Node\(s\) placed on \[(\w+)\]")
_ALL_ON = re.compile(r"All nodes placed on \[(\w+)\]")
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
_APPLYING = re.compile(r"Applying graph transformer (\S+) on step")


def parse_fired(lines: list[str]) -> dict[str, int]:
    """ORT's INFO lines ``GraphTransformer X modified: 1`` -> {transformer: times it fired}."""
    out: dict[str, int] = {}
    for line in lines:
        hit = _FIRED.search(line)
        if hit and hit.group(2) != "0":
            out[hit.group(1)] = out.get(hit.group(1), 0) + 1
    return out


_STAMP = re.compile(r"^\d{4}-\d\d-\d\d (\d\d):(\d\d):(\d\d(?:\.\d+)?) \[[EWIV]:onnxruntime")
_LANDMARKS = {
    "options": "TraceSessionOptions",
    "initializing": "Initializing session.",
    "initializers": "Saving initialized tensors.",
    "done": "Session successfully initialized.",
}
_FACTORY_FAILED = "Error creating execution provider"
"""How ORT logs a plugin EP's factory failing to make the EP (it names no EP)."""
STAGES = ("load", "optimize", "partition & plan", "initializers & kernels")
"""Session-creation stages timed from ORT's own log timestamps (``session_stages``)."""


def _stamp_s(line: str) -> float | None:
    hit = _STAMP.match(line)
    if hit is None:
        return None
    h, m, sec = hit.groups()
    return int(h) * 3600 + int(m) * 60 + float(sec)


def session_stages(lines: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Where session creation spent its time, from the timestamps on ORT's INFO lines
    (severity <= 1): ``({stage: ms}, {transformer: ms summed over its steps})``; empty when
    the log lacks the landmarks.

    - load: from the session's options trace to "Initializing session." (the model parsed);
    - optimize: every graph transformer's run, from its "Applying graph transformer X" line
      to its "GraphTransformer X modified" line (verbose severity); with INFO lines only, from
      the line before (an upper bound);
    - partition & plan: the rest of "Initializing session." to "Saving initialized tensors."
      (EP partitioning, function inlining, execution plan);
    - initializers & kernels: from there to "Session successfully initialized." (initializers
      copied, kernels created, weights prepacked; an EP's compile when it compiles there)."""
    marks: dict[str, float] = {}
    transformer_ms: dict[str, float] = {}
    prev: float | None = None
    applying: tuple[str, float] | None = None
    verbose = any(_APPLYING.search(line) for line in lines)
    for line in lines:
        t = _stamp_s(line)
        if t is None:
            continue
        if prev is not None and t < prev - 43200:  # the log crossed midnight
            t += 86400
        for key, text in _LANDMARKS.items():
            if key not in marks and text in line:
                marks[key] = t
        start = _APPLYING.search(line)
        if start:
            applying = (start.group(1), t)
        hit = _FIRED.search(line)
        if hit and prev is not None and "initializing" in marks:
            name = hit.group(1)
            if applying is not None and applying[0] == name:
                took = t - applying[1]
            elif verbose:  # run outside the transformer manager: its start is not logged
                took = 0.0
            else:  # INFO only: since the line before (an upper bound)
                took = t - prev
            transformer_ms[name] = transformer_ms.get(name, 0.0) + took * 1e3
        prev = t
    if not all(k in marks for k in _LANDMARKS):
        return {}, {}
    optimize = sum(transformer_ms.values())
    graph_ms = (marks["initializers"] - marks["initializing"]) * 1e3
    stages = {
        "load": (marks["initializing"] - marks["options"]) * 1e3,
        "optimize": optimize,
        "partition & plan": max(graph_ms - optimize, 0.0),
        "initializers & kernels": (marks["done"] - marks["initializers"]) * 1e3,
    }
    return stages, transformer_ms


def _reason(
    provider: str, lines: list[str], warns: list[str], available: list[str], *, alone: bool
) -> str:
    """Why ``provider`` is not among the session's EPs, in ORT's words: the log lines that
    name it. A plugin EP's factory that fails names no EP ("Error creating execution
    provider: …"); that line is taken when ``provider`` is the only EP missing besides CPU."""
    if provider not in available:
        hint = INSTALL_HINTS.get(provider, "Install an onnxruntime package that includes it.")
        return f"not part of this onnxruntime build (it has {', '.join(available)}). {hint}"
    keys = (provider.lower(), *LOG_KEYWORDS.get(provider, ()))
    logged = [ln for ln in [*lines, *warns] if "*** EP Error ***" not in ln]
    relevant = [
        _LOG_PREFIX.sub("", ln).strip() for ln in logged if any(k in ln.lower() for k in keys)
    ]
    if not relevant and alone:
        relevant = [_LOG_PREFIX.sub("", ln).strip() for ln in logged if _FACTORY_FAILED in ln]
    joined = " ".join(dict.fromkeys(clean_ort_message(r) for r in relevant[:3]))
    said = (joined or "no reason")[:400]
    said += "" if said.endswith((".", "!", ")")) else "."
    return f"ORT said: {said} {INSTALL_HINTS.get(provider, '')}".strip()


def _check_level(level: str, ort: ModuleType) -> None:

    if not hasattr(ort.GraphOptimizationLevel, LEVELS[level]):
        raise SessionCreationError(
            f"Optimization level {level!r} ({LEVELS[level]}) is not in onnxruntime "
            f"{ort.__version__}; use 'extended' or 'all'."
        )


def session_options(
    config: SessionConfig,
    *,
    profile_prefix: str | None = None,
    log_severity: int = 2,
    optimized_model_path: str | None = None,
    extra_entries: dict[str, str] | None = None,
) -> ort.SessionOptions:
    """A real ``SessionOptions`` from :func:`ortlab.core.options.ort_options` (the same
    translation every snippet prints), plus what only ortlab's measurements need (profiling,
    log level, where to save the optimized model)."""
    import onnxruntime as ort

    spec = ort_options(config, extra_entries)
    so = ort.SessionOptions()
    _check_level(config.level, ort)
    for attr, value, _ in spec.attributes:
        setattr(so, attr, value.resolve(ort) if isinstance(value, Enum) else value)
    so.log_severity_level = log_severity
    for name, dim in spec.free_dims:
        so.add_free_dimension_override_by_name(name, dim)
    for key, text in spec.entries.items():
        so.add_session_config_entry(key, text)
    for lib in spec.libraries:
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
) -> tuple[ort.InferenceSession, SessionReport]:
    """Create the session and its :class:`SessionReport` (runs in the worker)."""
    import onnxruntime as ort

    auto_reasons: list[str] = []
    if config.policy:
        requested = [f"policy:{config.policy}"]
    elif config.providers == "auto":
        requested, auto_reasons = auto_providers()
    else:
        requested = list(config.providers)
    so = session_options(
        config,
        profile_prefix=profile_prefix,
        log_severity=log_severity,
        optimized_model_path=optimized_model_path,
        extra_entries=extra_entries,
    )
    by_device, unselected = _select_devices(so, requested, config)
    start = time.perf_counter()
    try:
        with capture_output() as cap:
            if by_device:  # plugin EPs (and policies) are chosen by device, never by name
                sess = ort.InferenceSession(model_path, so)
            else:
                providers: list[Any] = [
                    (p, config.options_for(p)) if config.options_for(p) else p for p in requested
                ]  # the same pairs ort_options(config).providers names (auto resolved here)
                sess = ort.InferenceSession(model_path, so, providers=providers)
    except Exception as err:
        message = clean_ort_message(str(err))
        if cache.is_inside(model_path):  # a file ortlab made: its name says nothing to a user
            message = message.replace(f" from {model_path}", "").replace(model_path, model_name)
        raise _classify_failure(message, model_name, config) from err
    create_ms = (time.perf_counter() - start) * 1e3
    active = list(sess.get_providers())
    available = list(ort.get_available_providers())
    lines = cap.lines()
    absent = [
        p for p in requested if not p.startswith("policy:") and split_device(p)[0] not in active
    ]
    alone = len(absent) == 1
    missing = [
        ProviderIssue(
            p, unselected.get(p) or _reason(p, lines, cap.warnings, available, alone=alone)
        )
        for p in absent
    ]
    stages_ms, transformer_ms = session_stages(lines)
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
        devices=measure_devices(),
        placements=parse_placements(lines),
        all_on=next((m.group(1) for ln in lines if (m := _ALL_ON.search(ln))), ""),
        fired=parse_fired(lines),
        why_log=why_lines(lines),
        transformers=list(dict.fromkeys(m.group(1) for ln in lines if (m := _FIRED.search(ln)))),
        stages_ms=stages_ms,
        transformer_ms=transformer_ms,
    )
    _enforce_fallback_policy(report, config, model_name)
    return sess, report


def _select_devices(
    so: ort.SessionOptions, requested: list[str], config: SessionConfig
) -> tuple[bool, dict[str, str]]:
    """Plugin EPs, ``ep:device`` names and policies go through ORT's device selection
    (``add_provider_for_devices`` / ``set_provider_selection_policy``): naming a plugin EP in
    ``providers=`` gives a CPU-only session without a word. Returns whether devices were
    selected, and why each requested EP that could not be selected was left out."""
    import onnxruntime as ort

    plugins = {p.name: p for p in registered()}
    spec = ort_options(
        config,
        plugin_eps={n: p.module for n, p in plugins.items()},
        resolved=None if config.providers != "auto" else requested,
    )
    if spec.policy:
        so.set_provider_selection_policy(getattr(ort.OrtExecutionProviderDevicePolicy, spec.policy))
        return True, {}
    if not spec.devices:
        return False, {}
    why: dict[str, str] = {}
    chosen = 0
    for name, choice in zip(requested, spec.devices, strict=True):
        found = plugin_devices(choice.ep, choice.device)
        if not found:
            why[name] = _unselected_reason(choice.ep, choice.device, plugins.get(choice.ep))
            continue
        so.add_provider_for_devices(found, choice.options)
        chosen += 1
    if not chosen:  # nothing requested is here: run on the CPU, and say why
        so.add_provider_for_devices(plugin_devices("CPUExecutionProvider"), {})
    return True, why


def _unselected_reason(ep: str, device: str | None, plugin: PluginEP | None) -> str:
    kind = f"{device} " if device else ""
    if plugin is None:
        hint = next((cmd for mod, cmd in PLUGIN_PACKAGES.items() if ep.lower()[:4] in mod), "")
        return (
            f"{ep} has no {kind}device here: not part of this onnxruntime build and no "
            f"plugin package for it is installed. {hint}".strip()
        )
    if plugin.error:
        return f"the {plugin.module} {plugin.version} plugin failed to register: {plugin.error}"
    listed = ", ".join(plugin.devices) or "none"
    return (
        f"the {plugin.module} {plugin.version} plugin is registered but lists no {kind}"
        f"device on this machine (devices it listed: {listed}); ORT would have run the "
        "model on CPU without a word had the EP been named in providers="
    )


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


@functools.cache
def _auto_cached() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(what ``providers='auto'`` takes: every EP a trial session loaded, best first; why for
    each EP in the build). Each is tried as :func:`build_session` selects it
    (:func:`_select_devices`: a plugin EP by its devices, named in ``providers=`` it never
    loads); a name in the build that is no EP of
    :data:`AUTO_ORDER` (a plugin's meta-device, such as OpenVINO's ``.AUTO``) is said, not
    tried: a SessionConfig names the plugin's EP."""
    import onnxruntime as ort

    registered()  # plugin EPs join the build's list once registered: the same answer always

    available = list(ort.get_available_providers())
    chosen: list[str] = []
    reasons = [
        f"{_short(p)}: in this build as a plugin's meta-device, not an EP ortlab selects by "
        f"name (name the plugin's EP: {p.split('.')[0]})"
        for p in available
        if "." in p and p.split(".")[0] in AUTO_ORDER
    ]
    probe = probe_model(8, 13)
    for ep in AUTO_ORDER:
        if ep not in available:
            continue
        so = ort.SessionOptions()
        so.log_severity_level = 3
        asked = [ep, "CPUExecutionProvider"]
        with capture_output() as cap:
            try:  # chosen as build_session chooses: a plugin EP by its devices
                if _select_devices(so, asked, SessionConfig(providers=asked))[0]:
                    got = ort.InferenceSession(probe, so)
                else:
                    got = ort.InferenceSession(probe, so, providers=asked)
                loaded = ep in got.get_providers()
            except Exception:  # noqa: BLE001 - a failing trial means "cannot load"
                loaded = False
        if loaded:
            chosen.append(ep)
            reasons.append(f"{_short(ep)}: in this build and a trial session loaded it")
        else:
            why = _reason(ep, cap.lines(), cap.warnings, available, alone=True)
            reasons.append(f"{_short(ep)}: in this build but cannot load here ({why})")
    chosen.append("CPUExecutionProvider")
    reasons.append("cpu: always available, takes every node the others do not")
    skipped = [
        _short(p) for p in AUTO_ORDER if p not in available and p in PROVIDER_ALIASES.values()
    ]
    if skipped:
        reasons.append(f"not in this build: {', '.join(skipped)}")
    return tuple(chosen), tuple(reasons)


def auto_providers() -> tuple[list[str], list[str]]:
    """The providers that really load here, best first, with the reason for each choice."""
    chosen, reasons = _auto_cached()
    return list(chosen), list(reasons)
