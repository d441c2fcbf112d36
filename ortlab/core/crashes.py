"""Graph patterns known to crash onnxruntime's process (not an error it returns): said beside a
worker crash, so the user learns the trigger instead of bisecting settings. Each entry names
the upstream issue and the onnxruntime version it was seen with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.core.onnx_util import walk_nodes

if TYPE_CHECKING:
    import onnx

__all__ = ["known_crashes"]


def known_crashes(proto: onnx.ModelProto) -> list[str]:
    """A sentence per known crash pattern ``proto`` holds (empty: none known)."""
    unbiased = [
        node.name or node.output[0]
        for node, _ in walk_nodes(proto.graph)
        if node.domain == "com.microsoft"
        and node.op_type == "Attention"
        and (len(node.input) < 3 or not node.input[2])
    ]
    if not unbiased:
        return []
    more = f" and {len(unbiased) - 1} more" if len(unbiased) > 1 else ""
    return [
        f"The model has com.microsoft.Attention without its bias input (node {unbiased[0]!r}"
        f"{more}): onnxruntime's CPU kernel crashes the process on it (microsoft/onnxruntime"
        "#25005; seen with 1.31.1). Exporters that drop a zero bias make such nodes "
        "(onnxruntime-genai's builder does): give each a bias of zeros, or run on another EP."
    ]
