"""The worker task behind ``ortlab.cost`` and ``ortlab.roofline``: one profiled run that records
every tensor's shape as ORT ran it, with the graph ORT ran (names, attributes, weights' shapes).

Why both: ORT's profile lists each node's inputs as the kernel saw them, and a kernel that
pre-packed a weight (MatMul, MatMulInteger, LSTM…) has released it, so the profile omits it. The
outputs are always recorded. So every tensor's shape comes from the node that wrote it (the
profile), the feeds, or an initializer of the saved optimized model (its dims, not its data).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core import cache
from ortlab.core.eps import compiling
from ortlab.core.errors import RunError
from ortlab.core.machine import cpu_sample
from ortlab.core.onnx_util import Attr, attr_values, dtype_name, ort_node_name, subgraphs
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.replies import GraphNode, ShapesReply
from ortlab.engine.session import build_session
from ortlab.engine.sessioncache import release_after_reply
from ortlab.engine.tasks import profiled_runs, side_weights
from ortlab.engine.tasks_peaks import PeakKernel, peak_kernels
from ortlab.engine.trace import ProfileData

if TYPE_CHECKING:
    import onnx

__all__ = ["shapes"]


_NUMPY_NAMES = {"float32": "float", "float64": "double", "object": "string", "str": "string"}


def _attrs(node: onnx.NodeProto) -> tuple[tuple[str, Attr], ...]:
    return tuple(attr_values(node).items())


def _ort_names(graph: onnx.GraphProto, out: dict[tuple[str, str], str]) -> None:
    """ORT's names for the loaded model's unnamed nodes, by (op_type, first output): the
    profiler calls one ``<op_type>_<index>``, its index in its graph as loaded. The saved
    optimized model writes nodes in topological order, so its positions are not those."""
    for i, n in enumerate(graph.node):
        if not n.name and n.output:
            out.setdefault((n.op_type, n.output[0]), ort_node_name(n, i))
        for body in subgraphs(n):
            _ort_names(body, out)


def _walk(
    graph: onnx.GraphProto,
    nodes: list[GraphNode],
    tensors: dict[str, tuple[str, tuple[int, ...]]],
    weights: set[str],
    names: Mapping[tuple[str, str], str],
) -> None:
    """Every node (bodies too; an unnamed one under ORT's name for it, or '' when that is
    not known) and every initializer's dims."""
    for t in graph.initializer:
        tensors[t.name] = (dtype_name(t.data_type), tuple(int(d) for d in t.dims))
        weights.add(t.name)
    for sp in graph.sparse_initializer:
        tensors[sp.values.name] = (dtype_name(sp.values.data_type), tuple(sp.dims))
        weights.add(sp.values.name)
    for n in graph.node:
        name = n.name or (names.get((n.op_type, n.output[0]), "") if n.output else "")
        nodes.append(
            GraphNode(name, n.op_type, n.domain, tuple(n.input), tuple(n.output), _attrs(n))
        )
        for body in subgraphs(n):
            _walk(body, nodes, tensors, weights, names)


def _outputs(
    nodes: tuple[GraphNode, ...], data: ProfileData
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each produced tensor's (dtype, dims), from the profile's record of its node's outputs
    (ORT lists the outputs that exist, in order)."""
    by_name = {n.name: n for n in reversed(nodes) if n.name}  # the first of duplicates wins
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, types in zip(data.node, data.output_types, strict=True):
        node = by_name.get(name)
        if node is None:  # not in the saved graph under that name: counted from the profile
            continue
        produced = [t for t in node.outputs if t]
        for tensor, (dtype, dims) in zip(produced, types, strict=False):
            out.setdefault(tensor, (dtype, dims))
    return out


def shapes(
    progress: Progress,
    job: ModelJob,
    *,
    runs: int = 1,
    warmup: int = 0,
    peaks: tuple[str, ...] = (),
) -> ShapesReply:
    """Profile ``runs`` runs and save the optimized model, then read its graph and weights'
    dims (not their data) back. With ``peaks`` (precisions: fp32, int8, fp16), the peak
    kernels of :mod:`ortlab.engine.tasks_peaks` run ``runs`` rounds in the same worker just
    before the model's runs: after them, the session's spinning thread pool would take the
    cores from the peak kernels (measured: half the GEMM's FLOP/s)."""
    model_path, model_name, config, feeds = job.model_path, job.model_name, job.config, job.feeds
    import onnx

    compiled = compiling(config.providers, config.policy)
    if compiled:
        raise RunError(
            f"ortlab.cost counts the kernels ORT runs; {', '.join(compiled)} compiles parts of "
            "the graph into kernels of its own, whose work ortlab cannot see. Count it on the "
            "CPU EP (config=None) instead."
        )
    with cache.temp_dir("cost-") as folder:
        since = cpu_sample()
        sess, report = build_session(
            model_path,
            config,
            model_name=model_name,
            profile_prefix=str(folder / "profile"),
            optimized_model_path=str(folder / "final.onnx"),
            extra_entries=side_weights("final.onnx.data"),
        )
        kernels: list[PeakKernel] = peak_kernels(config, list(peaks), folder) if peaks else []
        for _ in range(runs):  # before the model's first run: its pool does not spin yet
            for k in kernels:
                k.time_once()
        data = profiled_runs(sess, config, feeds, model_name, runs, warmup, progress, since)
        proto = onnx.load(str(Path(folder) / "final.onnx"), load_external_data=False)
    release_after_reply(sess, *kernels)
    names: dict[tuple[str, str], str] = {}
    if any(not n.name for n in proto.graph.node):  # only then: the original's ORT names
        _ort_names(onnx.load(model_path, load_external_data=False).graph, names)
    nodes: list[GraphNode] = []
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    weights: set[str] = set()
    _walk(proto.graph, nodes, tensors, weights, names)
    for name, value in feeds.items():
        arr = np.asarray(value)
        tensors[name] = (_NUMPY_NAMES.get(arr.dtype.name, arr.dtype.name), tuple(arr.shape))
    frozen = tuple(nodes)
    for tensor, typed in _outputs(frozen, data).items():
        tensors.setdefault(tensor, typed)
    return ShapesReply(
        data=data,
        report=report,
        nodes=frozen,
        tensors=tensors,
        initializers=frozenset(weights),
        peaks=[k.result() for k in kernels],
    )
