"""ORT's transformers optimizer (``onnxruntime.transformers.optimizer``), with its parameters
inferred from the graph and an explanation when attention does not fuse.

The optimizer needs a model type, the number of attention heads and the hidden size. We read
them from the graph when the user does not give them, and say how each was found: the hidden
size from the embedding table or square projection weights, the heads from the Reshape that
splits the hidden size into (heads, head_size).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import onnx
from onnx import numpy_helper

from ortlab.analysis.graph.mapping import Group, graph_nodes, map_nodes
from ortlab.core import cache
from ortlab.core.errors import OrtlabError
from ortlab.core.model import ModelLike, load
from ortlab.core.onnx_util import compute_in_bodies
from ortlab.core.result import Result, Table
from ortlab.engine import tasks_transform
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task

__all__ = ["TransformerOptResult", "infer_transformer_params", "transformer_optimize"]


@dataclass(frozen=True)
class TransformerOptResult(Result):
    model: str
    model_type: str
    num_heads: int
    hidden_size: int
    found: dict[str, str]
    """How each parameter was chosen ('given', or where in the graph it was read)."""
    fused_operators: dict[str, int]
    attention_fused: bool
    fully_optimized: bool
    reason: str
    """Why attention did not fuse, in plain words ('' when it did)."""
    path: str
    nodes_before: int
    nodes_after: int
    op_types_after: dict[str, int]
    groups: list[Group]
    status: dict[str, str]
    log: list[str] = field(default_factory=list)

    @property
    def diff(self) -> Table:
        """Each fused node of the optimized model with the original nodes it replaced."""
        import pandas as pd

        rows = [
            {
                "optimized": ", ".join(g.optimized),
                "kind": g.kind,
                "original": g.original,
                "n_original": len(g.original),
            }
            for g in self.groups
            if g.kind != "kept"
        ]
        return pd.DataFrame(rows, columns=["optimized", "kind", "original", "n_original"])

    def to_pandas(self) -> Table:
        """Fused operators the optimizer produced: operator, count (zeros included)."""
        import pandas as pd

        return pd.DataFrame(list(self.fused_operators.items()), columns=["operator", "count"])

    def __repr__(self) -> str:
        fused = {k: v for k, v in self.fused_operators.items() if v}
        return (
            f"<TransformerOptResult {self.model!r} ({self.model_type}, heads={self.num_heads}, "
            f"hidden={self.hidden_size}): {self.nodes_before} → {self.nodes_after} nodes, "
            f"fused {fused}; attention {'fused' if self.attention_fused else 'NOT fused'}>"
        )


def _initializer_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}


def infer_transformer_params(model: onnx.ModelProto) -> tuple[str, int, int, dict[str, str]]:
    """(model_type, num_heads, hidden_size, how each was found); 0 where not found."""
    graph = model.graph
    shapes = _initializer_shapes(graph)
    found: dict[str, str] = {}
    hidden = 0
    for n in graph.node:
        if n.op_type == "Gather" and n.input and len(shapes.get(n.input[0], ())) == 2:
            hidden = shapes[n.input[0]][1]
            found["hidden_size"] = (
                f"{hidden}, from embedding table {n.input[0]!r} {shapes[n.input[0]]}"
            )
            break
    if not hidden:
        weights = [shapes.get(n.input[1], ()) for n in graph.node if n.op_type == "MatMul"]
        square = Counter(s[0] for s in weights if len(s) == 2 and s[0] == s[1])
        if square:
            hidden = square.most_common(1)[0][0]
            found["hidden_size"] = f"{hidden}, the most common square MatMul weight size"
    heads = 0
    inits = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Reshape" and len(n.input) > 1 and n.input[1] in inits:
            shape = numpy_helper.to_array(inits[n.input[1]]).tolist()
            if len(shape) == 4 and hidden and shape[2] > 0 and shape[2] * shape[3] == hidden:
                heads = int(shape[2])
                found["num_heads"] = f"{heads}, from Reshape {n.name!r} to {shape}"
                break
    causal = any(n.op_type == "Trilu" for n in graph.node) or any(
        "past" in i.name for i in graph.input
    )
    image = any(len(i.type.tensor_type.shape.dim) == 4 for i in graph.input) and any(
        n.op_type == "Conv" for n in graph.node
    )
    ops = Counter(n.op_type for n in graph.node)
    attention = ops["Softmax"] >= 1 and ops["MatMul"] >= 2
    if not attention:  # a CNN is no ViT: only the generic fusions (LayerNorm, Gelu) can apply
        model_type = "bert"
        found["model_type"] = (
            "bert, the generic fusions only: no attention here (no Softmax between MatMuls), "
            "so this is not a transformer and its attention cannot fuse"
        )
        return model_type, heads, hidden, found
    model_type = "gpt2" if causal else "vit" if image else "bert"
    why = (
        "a causal mask (Trilu) or past inputs"
        if causal
        else "attention over a 4-D image input with a Conv patch embedding"
        if image
        else "attention over token inputs without a causal mask"
    )
    found["model_type"] = f"{model_type}, {why}"
    return model_type, heads, hidden, found


def _attention_reason(model: onnx.ModelProto, stats: dict[str, int]) -> str:
    if stats.get("Attention", 0) or stats.get("MultiHeadAttention", 0):
        return ""
    graph = model.graph
    names = " ".join(n.name for n in graph.node).lower()
    if "scaled_dot_product" in names or "sdpa" in names:
        return (
            "the graph comes from PyTorch's scaled_dot_product_attention (SDPA), whose exported "
            "pattern ORT's attention fusion does not match. Re-export with eager attention "
            "(transformers: attn_implementation='eager') and the TorchScript exporter "
            "(torch.onnx.export(..., dynamo=False))."
        )
    if any(n.name.startswith("node_") for n in graph.node):
        return (
            "the graph looks like a dynamo (torch.export) export, whose attention pattern ORT's "
            "fusion does not match. Re-export with torch.onnx.export(..., dynamo=False) and "
            "eager attention."
        )
    if not any(n.op_type == "Softmax" for n in graph.node):
        return "the graph has no Softmax, so no attention block to fuse."
    return (
        "ORT's attention fusion did not match this graph's attention subgraph (mask or "
        "reshape layout differs from the BERT/GPT-2 exports it knows); check num_heads and "
        "hidden_size, or export with the legacy exporter and eager attention."
    )


def transformer_optimize(
    model: ModelLike,
    model_type: str | None = None,
    num_heads: int | None = None,
    hidden_size: int | None = None,
    *,
    opt_level: int = 0,
    use_gpu: bool = False,
    progress: bool | Callable[[int, int], None] = False,
    timeout: float | None = None,
) -> TransformerOptResult:
    """Run ORT's transformers optimizer in the worker, with inferred parameters.

    ``opt_level=0`` (the default) applies the optimizer's Python fusions only; ORT's own graph
    optimizations still run when a session is built. Levels 1/2/99 first run ORT's optimizer
    offline, which ``onnxruntime.transformers`` does only with torch installed."""
    if opt_level not in (0, 1, 2, 99):
        raise ValueError(f"opt_level must be 0, 1, 2 or 99, not {opt_level!r}")
    if opt_level:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise OrtlabError(
                f"transformer_optimize(opt_level={opt_level}) needs torch: "
                "onnxruntime.transformers imports it for the offline ORT pass. "
                "pip install torch==2.13.0, or keep opt_level=0 (Python fusions only; ORT "
                "optimizes again when the session is built)."
            )

    m = load(model)
    inside = compute_in_bodies(m.proto.graph)
    if inside:
        raise OrtlabError(
            f"{m.name!r} keeps {inside} of its MatMul/Gemm/Conv nodes inside If/Loop/Scan bodies "
            "(an optimum merged decoder holds its network in an If): onnxruntime's transformers "
            "optimizer rewrites the main graph only, and its output would not load. Optimize "
            "an export without the merge (optimum-onnx's text-generation-with-past writes one "
            "model.onnx with past inputs and no If), or serve this model as it is: ORT fuses "
            "inside the branches itself when the session is built."
        )
    inferred_type, inferred_heads, inferred_hidden, found = infer_transformer_params(m.proto)
    mt = model_type or inferred_type
    heads = num_heads if num_heads is not None else inferred_heads
    hidden = hidden_size if hidden_size is not None else inferred_hidden
    for key, given in (
        ("model_type", model_type),
        ("num_heads", num_heads),
        ("hidden_size", hidden_size),
    ):
        if given is not None:
            found[key] = f"{given}, given"
    if not heads or not hidden or hidden % heads:  # the optimizer wants both, consistent, or 0
        if heads or hidden:
            found["note"] = (
                f"heads={heads}, hidden={hidden} are not a consistent pair: passing 0 for both "
                "so the optimizer detects them itself"
            )
        heads = hidden = 0
    found.setdefault("num_heads", "0: not found in the graph, the optimizer detects it")
    found.setdefault("hidden_size", "0: not found in the graph, the optimizer detects it")
    digest = hashlib.sha256(f"{m.fingerprint()}|{mt}|{heads}|{hidden}|{opt_level}".encode())
    out_path = cache.subdir("transformers") / f"{m.name[:40]}-{digest.hexdigest()[:16]}.onnx"
    out = run_task(
        tasks_transform.transformer_optimize,
        Via(
            desc=f"transformers optimizer {m.name}",
            context=f"of {m.name!r}",
            progress=progress,
            timeout=timeout,
        ),
        model_path=str(m.path),
        out_path=str(out_path),
        model_type=mt,
        num_heads=heads,
        hidden_size=hidden,
        opt_level=opt_level,
        use_gpu=use_gpu,
    )
    optimized = onnx.load(str(out_path), load_external_data=False)
    original = graph_nodes(m.proto.graph)
    final = graph_nodes(optimized.graph)
    g = m.proto.graph
    mapping = map_nodes(original, final, [t.name for t in g.initializer], [i.name for i in g.input])
    stats = {k: int(v) for k, v in out.stats.items()}
    return TransformerOptResult(
        model=m.name,
        model_type=mt,
        num_heads=heads,
        hidden_size=hidden,
        found=found,
        fused_operators=stats,
        attention_fused=bool(stats.get("Attention", 0) or stats.get("MultiHeadAttention", 0)),
        fully_optimized=out.fully_optimized,
        reason=_attention_reason(m.proto, stats),
        path=str(out_path),
        nodes_before=len(original),
        nodes_after=len(final),
        op_types_after=dict(Counter(n.op_type for n in final).most_common()),
        groups=mapping.groups,
        status=mapping.status,
        log=out.log,
    )
