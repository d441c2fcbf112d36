"""Plain-onnxruntime Python for a SessionConfig, written from the same
:class:`~ortlab.engine.options.OrtOptions` the engine applies."""

from __future__ import annotations

from ortlab.core.config import SessionConfig
from ortlab.engine.options import Enum, ort_options

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


def config_snippet(c: SessionConfig, model_path: str = "model.onnx") -> str:
    """Python that builds the session ``c`` describes with plain onnxruntime (ORT's defaults
    left out, the optimization level always written)."""
    spec = ort_options(c)
    lines = ["import onnxruntime as ort", "", "so = ort.SessionOptions()"]
    for attr, value, default in spec.attributes:
        if not default:
            lines.append(f"so.{attr} = {value if isinstance(value, Enum) else repr(value)}")
    lines += [f"so.add_free_dimension_override_by_name({n!r}, {v})" for n, v in spec.free_dims]
    lines += [f"so.add_session_config_entry({k!r}, {t!r})" for k, t in spec.entries.items()]
    lines += [f"so.register_custom_ops_library({lib!r})" for lib in spec.libraries]
    if spec.providers == "auto":
        provs = "ort.get_available_providers()  # ortlab 'auto' picks those that really load"
    else:
        provs = "[" + ", ".join(repr(p) for p in spec.providers) + "]"
    lines.append(f"sess = ort.InferenceSession({model_path!r}, so, providers={provs})")
    lines.append("print(sess.get_providers())  # check: a provider that fails to load is dropped")
    if spec.io_binding:
        lines += _IO_BINDING
    return "\n".join(lines)
