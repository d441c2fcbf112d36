"""What this onnxruntime build accepts and which devices it sees, measured in place (in the
worker: :mod:`ortlab.engine.providers` is the caller's side). The IR and opset limits are
probed, not assumed: ORT accepts models stamped with an opset up to its last *released* one,
lower than the newest schema it carries (1.31 carries opset-27 schemas but refuses opset 27).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ortlab.core.run import Progress
from ortlab.core.runtime import Device, RuntimeLimits
from ortlab.engine.plugins import device_type

__all__ = ["measure_devices", "measure_limits", "probe_model"]


def probe_model(ir_version: int, opset: int) -> bytes:
    """One Identity node: the smallest model a trial session can load."""
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


def measure_limits(progress: Progress | None = None) -> RuntimeLimits:  # noqa: ARG001 - task signature
    """(worker task) The newest IR version and opsets this onnxruntime accepts."""
    import onnxruntime as ort
    from onnxruntime.capi import _pybind_state as pybind

    schema_max: dict[str, int] = {}
    for schema in pybind.get_all_operator_schema():
        schema_max[schema.domain] = max(schema_max.get(schema.domain, 1), schema.since_version)
    top_opset = max(schema_max.get("", 1), onnx.defs.onnx_opset_version())
    max_opset = next((v for v in range(top_opset, 0, -1) if _loads(probe_model(7, v))), top_opset)
    max_ir = next(
        (v for v in range(onnx.IR_VERSION + 1, 2, -1) if _loads(probe_model(v, 13))),
        onnx.IR_VERSION,
    )
    per_domain = dict(schema_max)
    per_domain[""] = max_opset
    per_domain["ai.onnx"] = max_opset
    return RuntimeLimits(
        ort_version=str(ort.__version__), max_ir_version=max_ir, max_opset=per_domain
    )


def measure_devices() -> list[Device]:
    """(in the worker) The real devices ORT sees (not the build's provider list)."""
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
