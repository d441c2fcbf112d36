"""Execution providers by name: ORT's full names, ortlab's short aliases, which ones compile
subgraphs, the Memcpy nodes ORT inserts between them, the order ``providers="auto"`` tries them
in, and what to install when one does not load. One home for every EP fact ortlab knows; a new
EP is a few lines here (and, if it needs session options, in ``ortlab.core.options``)."""

from __future__ import annotations

import importlib.util
import pkgutil

from ortlab.core.errors import ProviderError

__all__ = [
    "AUTO_ORDER",
    "COMPILING_EPS",
    "DEVICE_TYPES",
    "INSERTED_CAST",
    "INSTALL_HINTS",
    "KNOWN_PROVIDERS",
    "LOG_KEYWORDS",
    "MEMCPY_OPS",
    "PLUGIN_EPS",
    "PLUGIN_PACKAGES",
    "POLICIES",
    "PROVIDER_ALIASES",
    "alias",
    "canonical_provider",
    "label",
    "plugin_modules",
    "split_device",
]

PROVIDER_ALIASES: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "nv": "NvTensorRTRTXExecutionProvider",
    "trtrtx": "NvTensorRTRTXExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "ov": "OpenVINOExecutionProvider",
    "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "dnnl": "DnnlExecutionProvider",
    "onednn": "DnnlExecutionProvider",
    "nnapi": "NnapiExecutionProvider",
    "acl": "ACLExecutionProvider",
    "armnn": "ArmNNExecutionProvider",
    "cann": "CANNExecutionProvider",
    "vitisai": "VitisAIExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "azure": "AzureExecutionProvider",
    "snpe": "SNPEExecutionProvider",
}
KNOWN_PROVIDERS = frozenset(PROVIDER_ALIASES.values())


DEVICE_TYPES = ("CPU", "GPU", "NPU")
"""ORT's OrtHardwareDeviceType names: ``openvino:NPU`` picks that device of a plugin EP."""

POLICIES = {
    "default": "DEFAULT",
    "prefer_cpu": "PREFER_CPU",
    "prefer_npu": "PREFER_NPU",
    "prefer_gpu": "PREFER_GPU",
    "max_performance": "MAX_PERFORMANCE",
    "max_efficiency": "MAX_EFFICIENCY",
    "min_overall_power": "MIN_OVERALL_POWER",
}
"""ORT's ``OrtExecutionProviderDevicePolicy``: let ORT pick EPs and devices
(``SessionConfig(policy="prefer_npu")``)."""


def split_device(provider: str) -> tuple[str, str | None]:
    """``'OpenVINOExecutionProvider:NPU'`` → ``('OpenVINOExecutionProvider', 'NPU')``."""
    ep, sep, device = provider.partition(":")
    return ep, (device or None) if sep else None


def canonical_provider(name: str) -> str:
    """``'trt'`` → ``'TensorrtExecutionProvider'``; full names pass case-insensitively;
    ``'openvino:npu'`` → ``'OpenVINOExecutionProvider:NPU'`` (a device of a plugin EP)."""
    if not isinstance(name, str) or not name.strip():
        raise ProviderError(f"Execution provider names are strings, got {name!r}.")
    base, device = split_device(name.strip())
    full = _canonical_ep(base, name)
    if device is None:
        return full
    if device.upper() not in DEVICE_TYPES:
        raise ProviderError(
            f"Unknown device {device!r} in {name!r}: use one of {', '.join(DEVICE_TYPES)} "
            "(e.g. 'openvino:NPU'); ortlab.devices() lists what this machine has."
        )
    return f"{full}:{device.upper()}"


def _canonical_ep(base: str, name: str) -> str:
    key = base.lower()
    if key in PROVIDER_ALIASES:
        return PROVIDER_ALIASES[key]
    for full in KNOWN_PROVIDERS:
        if full.lower() == key or full.lower() == key + "executionprovider":
            return full
    if key.endswith("executionprovider"):
        return base  # an EP ortlab does not know by name (a plugin EP): pass through
    aliases = ", ".join(sorted(PROVIDER_ALIASES))
    raise ProviderError(
        f"Unknown execution provider {name!r}. Use a short alias ({aliases}) or ORT's full name "
        "(e.g. 'CUDAExecutionProvider'); onnxruntime.get_available_providers() lists this build's."
    )


def alias(provider: str) -> str:
    """``'CUDAExecutionProvider'`` → ``'cuda'`` (the first alias); unknown names lose their
    ``ExecutionProvider`` suffix; a device stays (``'openvino:NPU'``)."""
    ep, device = split_device(provider)
    short = next((a for a, full in PROVIDER_ALIASES.items() if full == ep), None)
    short = short or ep.removesuffix("ExecutionProvider")
    return f"{short}:{device}" if device else short


def label(provider: str) -> str:
    """``'CUDAExecutionProvider'`` → ``'CUDA'``: ORT's own name without the suffix, for titles."""
    return provider.removesuffix("ExecutionProvider")


# Execution providers that compile subgraphs into opaque nodes: a session using one cannot save
# its optimized model, but can dump an EPContext model with the same partition.
COMPILING_EPS = frozenset(
    {
        "OpenVINOExecutionProvider",
        "TensorrtExecutionProvider",
        "NvTensorRTRTXExecutionProvider",
        "QNNExecutionProvider",
        "VitisAIExecutionProvider",
        "CoreMLExecutionProvider",
        "MIGraphXExecutionProvider",
    }
)


def compiling(providers: tuple[str, ...] | str, policy: str | None = None) -> list[str]:
    """Which of ``providers`` compile parts of the graph into kernels of their own; 'auto' or
    a selection policy may pick one, so they count as compiling (named as given)."""
    if policy:
        return [f"policy:{policy}"]
    if providers == "auto":
        return ["auto"]
    return [p for p in providers if p in COMPILING_EPS]


MEMCPY_OPS = frozenset({"MemcpyFromHost", "MemcpyToHost"})
"""Nodes ORT inserts where a tensor crosses between a device EP and the CPU."""

INSERTED_CAST = "InsertedPrecisionFreeCast_"
"""The name ORT gives a Cast it inserts so that a node its EP has no kernel for at its
precision (fp16 on the CPU EP) runs in float: this prefix, then the tensor it casts."""

AUTO_ORDER = (
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
"""The order ``providers="auto"`` tries EPs in (each only if it really loads here)."""

INSTALL_HINTS = {
    "CUDAExecutionProvider": "Install the CUDA and cuDNN versions this onnxruntime-gpu needs "
    "(named above) on a machine with an NVIDIA GPU, or drop 'cuda'.",
    "TensorrtExecutionProvider": "Install TensorRT (libnvinfer) and CUDA matching this "
    "onnxruntime-gpu, or drop 'trt'.",
    "OpenVINOExecutionProvider": "pip install --no-deps onnxruntime-ep-openvino (a plugin EP, "
    "next to onnxruntime-gpu), or onnxruntime-openvino in an environment of its own.",
    "DmlExecutionProvider": "DirectML needs Windows and pip install onnxruntime-directml.",
    "CoreMLExecutionProvider": "CoreML needs macOS and the standard onnxruntime wheel.",
    "QNNExecutionProvider": "QNN runs on a Qualcomm device; pip install --no-deps onnxruntime-qnn "
    "(a plugin EP) also compiles for one here: ortlab.whatif(model, targets=['qnn']).",
    "ROCMExecutionProvider": "ROCm needs an AMD GPU and an onnxruntime build with ROCm.",
    "MIGraphXExecutionProvider": "MIGraphX needs an AMD GPU and onnxruntime-migraphx.",
}
LOG_KEYWORDS = {
    "CUDAExecutionProvider": ("cuda", "cublas", "cudnn", "libcu"),
    "TensorrtExecutionProvider": ("tensorrt", "nvinfer", "trt"),
    "OpenVINOExecutionProvider": ("openvino",),
}

PLUGIN_PACKAGES: dict[str, str] = {
    "onnxruntime_ep_openvino": "pip install --no-deps onnxruntime-ep-openvino",
    "onnxruntime_qnn": "pip install --no-deps onnxruntime-qnn",
}
"""Plugin EP packages ortlab knows by name (any installed ``onnxruntime_ep_*`` module is found
too), with the command that installs one without replacing onnxruntime-gpu (their own
dependency on the ``onnxruntime`` wheel would)."""

PLUGIN_EPS: dict[str, str] = {
    "OpenVINOExecutionProvider": "onnxruntime_ep_openvino",
    "QNNExecutionProvider": "onnxruntime_qnn",
}
"""The EPs those packages register, with their module: such an EP is selected by device
(``add_provider_for_devices``), never by name (a named plugin EP gives a CPU-only session)."""


def plugin_modules() -> list[str]:
    """Known plugin packages plus any installed ``onnxruntime_ep_*`` module (found on the
    path, not imported)."""
    found = [m for m in PLUGIN_PACKAGES if importlib.util.find_spec(m) is not None]
    for info in pkgutil.iter_modules():
        if info.name.startswith("onnxruntime_ep_") and info.name not in found:
            found.append(info.name)
    return found
