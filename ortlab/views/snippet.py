"""Plain-onnxruntime Python for a SessionConfig, written from the same
:class:`~ortlab.core.options.OrtOptions` the engine applies."""

from __future__ import annotations

from ortlab.core.config import SessionConfig
from ortlab.core.eps import plugin_modules
from ortlab.core.options import DeviceChoice, Enum, ort_options

__all__ = ["config_snippet"]

_IO_BINDING = [
    "",
    "",
    "def run(feeds):  # feeds: {input name: numpy array}",
    "    binding = sess.io_binding()",
    "    for name, value in feeds.items():",
    "        binding.bind_cpu_input(name, value)",
    "    for out in sess.get_outputs():",
    "        binding.bind_output(out.name)",
    "    sess.run_with_iobinding(binding)",
    "    return binding.copy_outputs_to_cpu()",
]


def config_snippet(
    c: SessionConfig, model_path: str = "model.onnx", providers: list[str] | None = None
) -> str:
    """Python that builds the session ``c`` describes with plain onnxruntime (ORT's defaults
    left out, the optimization level always written). Plugin EPs, ``ep:DEVICE`` names and
    policies are selected by device as ortlab does (named in ``providers=`` a plugin EP gives
    a CPU-only session); ``providers``: what ``auto`` chose (a session report's ``requested``)."""
    spec = ort_options(c, resolved=providers)
    lines = ["import onnxruntime as ort", "", "so = ort.SessionOptions()"]
    for attr, value, default in spec.attributes:
        if not default:
            lines.append(f"so.{attr} = {value if isinstance(value, Enum) else repr(value)}")
    lines += [f"so.add_free_dimension_override_by_name({n!r}, {v})" for n, v in spec.free_dims]
    lines += [f"so.add_session_config_entry({k!r}, {t!r})" for k, t in spec.entries.items()]
    lines += [f"so.register_custom_ops_library({lib!r})" for lib in spec.libraries]
    if spec.policy:  # the policy chooses among every EP registered, plugins included
        for module in plugin_modules():
            lines += [
                f"import {module}",
                f"ort.register_execution_provider_library({module}.get_ep_name(), "
                f"{module}.get_library_path())",
            ]
        lines.append(
            f"so.set_provider_selection_policy(ort.OrtExecutionProviderDevicePolicy.{spec.policy})"
        )
        lines.append(f"sess = ort.InferenceSession({model_path!r}, so)")
    elif spec.devices:
        lines += _by_device(spec.devices)
        lines.append(f"sess = ort.InferenceSession({model_path!r}, so)")
    else:
        if spec.providers == "auto":
            provs = (
                "ort.get_available_providers()  # ortlab 'auto' keeps those that really "
                "load: see the session report's providers"
            )
        else:
            provs = "[" + ", ".join(repr(p) for p in spec.providers) + "]"
        lines.append(f"sess = ort.InferenceSession({model_path!r}, so, providers={provs})")
    lines.append("print(sess.get_providers())  # check: a provider that fails to load is dropped")
    if spec.io_binding:
        lines += _IO_BINDING
    return "\n".join(lines)


def _by_device(choices: list[DeviceChoice]) -> list[str]:
    """Register each plugin EP's library, then select devices as ortlab's session does."""
    lines = [""]
    for module in dict.fromkeys(ch.module for ch in choices if ch.module):
        lines += [
            f"import {module}",
            "",
            f"ort.register_execution_provider_library({module}.get_ep_name(), "
            f"{module}.get_library_path())",
        ]
    lines += [
        "",
        "",
        "def select(ep, device_type=None, options=None):",
        "    found = [d for d in ort.get_ep_devices() if d.ep_name == ep and (device_type is "
        "None or d.device.type == getattr(ort.OrtHardwareDeviceType, device_type))]",
        "    if found:",
        "        so.add_provider_for_devices(found, options or {})",
        "    return bool(found)",
        "",
        "",
        "chosen = [",
        *(f"    select({ch.ep!r}, {ch.device!r}, {ch.options!r})," for ch in choices),
        "]",
        "if not any(chosen):  # none of them has a device here: ortlab runs it on the CPU",
        "    select('CPUExecutionProvider')",
    ]
    return lines
