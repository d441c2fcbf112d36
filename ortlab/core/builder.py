"""A tiny graph builder for the generated example models (and the tests' model registry)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class GraphBuilder:
    """Collects nodes/initializers with unique names and PyTorch-style scoped node names."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.rng = np.random.default_rng(seed)
        self._counter = 0
        self._names: set[str] = set()  # node names so far (a linear scan made 50k nodes take 6 min)

    def input(self, name: str, elem_type: int, shape: Sequence[int | str | None]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, name: str, elem_type: int, shape: Sequence[int | str | None]) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    def const(self, name: str, value: np.ndarray | np.generic) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, name: str, shape: Sequence[int], fan_in: int | None = None) -> str:
        fan = fan_in if fan_in is not None else (shape[0] if len(shape) > 1 else 1)
        std = np.sqrt(2.0 / max(fan, 1))
        return self.const(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        *,
        scope: str = "",
        n_out: int = 1,
        out: Sequence[str] | None = None,
        domain: str = "",
        **attrs: Any,
    ) -> str:
        """Add a node named like PyTorch exports it (``/scope/Op_3``); returns its first output."""
        self._counter += 1
        base = f"{scope}/{op_type}" if scope else f"/{op_type}"
        name = base if base not in self._names else f"{base}_{self._counter}"
        self._names.add(name)
        outs = list(out) if out else [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outs, name=name, domain=domain, **attrs)
        )
        return outs[0]

    def model(self, opset: int = 17, ir_version: int = 8) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, initializer=self.initializers
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset)],
            producer_name="ortlab.examples",
        )
        model.ir_version = ir_version
        onnx.checker.check_model(model)
        return model


F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
