"""A model's signature as input synthesis reads it: the graph inputs' names, element types and
shapes (:class:`TensorInfo`), and the model's name and graph (:class:`Signature`,
``Model.signature``). Feeds are made and checked from this alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

__all__ = ["Signature", "TensorInfo"]


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    """ONNX element type in lower case ('float', 'int64', 'float16'…)."""
    shape: tuple[int | str | None, ...] | None
    """Fixed dims as ints, symbolic dims by name, unknown dims as None; None if unranked."""
    kind: str = "tensor_type"
    """'tensor_type', or 'sequence_type' / 'map_type' / 'optional_type' for non-tensors."""

    def shape_text(self) -> str:
        if self.shape is None:
            return "?"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class Signature:
    """A model's name, graph inputs and proto: what :mod:`ortlab.core.inputs` and
    :mod:`ortlab.core.decoderinputs` read (``Model.signature``)."""

    name: str
    inputs: list[TensorInfo]
    proto: onnx.ModelProto
