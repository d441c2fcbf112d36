"""What this onnxruntime build can do: version, IR/opset limits, known op domains, devices.

Limits are measured, not assumed: ORT accepts models stamped with an opset up to its last
*released* one, which is lower than the newest schema it carries (1.31 carries opset-27 schemas
but refuses opset 27). We probe with a one-node model and remember the answer per process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import TensorProto, helper

__all__ = ["Device", "RuntimeLimits", "device_type", "devices", "limits", "ort_version"]


def ort_version() -> str:
    import onnxruntime as ort

    return str(ort.__version__)


@dataclass(frozen=True)
class RuntimeLimits:
    ort_version: str
    max_ir_version: int
    max_opset: dict[str, int]
    """Highest opset ORT accepts per domain ('' is ai.onnx)."""


def _probe_model(ir_version: int, opset: int) -> bytes:
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "ortlab_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return bytes(model.SerializeToString())


def _loads(data: bytes) -> bool:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any refusal means 'not supported'
        return False
    return True


@functools.cache
def limits() -> RuntimeLimits:
    """Measure the newest IR version and opsets this onnxruntime accepts (cached)."""
    from onnxruntime.capi import _pybind_state as pybind

    schema_max: dict[str, int] = {}
    for schema in pybind.get_all_operator_schema():
        schema_max[schema.domain] = max(schema_max.get(schema.domain, 1), schema.since_version)
    top_opset = max(schema_max.get("", 1), onnx.defs.onnx_opset_version())
    max_opset = next((v for v in range(top_opset, 0, -1) if _loads(_probe_model(7, v))), top_opset)
    max_ir = next(
        (v for v in range(onnx.IR_VERSION + 1, 2, -1) if _loads(_probe_model(v, 13))),
        onnx.IR_VERSION,
    )
    per_domain = dict(schema_max)
    per_domain[""] = max_opset
    per_domain["ai.onnx"] = max_opset
    return RuntimeLimits(ort_version=ort_version(), max_ir_version=max_ir, max_opset=per_domain)


@dataclass(frozen=True)
class Device:
    """A real device an execution provider can use, from ``ort.get_ep_devices()``."""

    ep_name: str
    ep_vendor: str
    device_type: str
    device_vendor: str
    device_id: int
    metadata: dict[str, str]


def device_type(ep_device: Any) -> str:
    """An ``OrtEpDevice``'s hardware type: ``OrtHardwareDeviceType.NPU`` → ``'NPU'``."""
    return str(ep_device.device.type).rsplit(".", 1)[-1]


def devices() -> list[Device]:
    """The real devices ORT sees (not the build's provider list)."""
    import onnxruntime as ort

    if not hasattr(ort, "get_ep_devices"):  # ORT < 1.22
        return []
    out = []
    for d in ort.get_ep_devices():
        meta = {str(k): str(v) for k, v in dict(d.device.metadata).items()}
        meta.update({f"ep.{k}": str(v) for k, v in dict(d.ep_metadata).items()})
        out.append(
            Device(
                ep_name=str(d.ep_name),
                ep_vendor=str(d.ep_vendor),
                device_type=device_type(d),
                device_vendor=str(d.device.vendor),
                device_id=int(getattr(d.device, "device_id", 0)),
                metadata=meta,
            )
        )
    return out
