"""Ask the EP itself: would it take this node alone? (runs in the worker)

Some EPs (OpenVINO, most compiling EPs) log no per-node verdict when they leave a node to the
CPU. For those nodes ortlab builds a one-node model — the node with its attributes, its
inputs' inferred types and shapes, its constant inputs as initializers — and creates a session
with the same providers. ORT's assignment API then says whether the EP claims it:

- refused alone: the EP does not support this op with these types/attributes (its own
  partitioner said so, here);
- taken alone: the op is supported; the EP left the node out in context (its cluster rules,
  a dynamic shape upstream, a neighbour it refused).

One probe per distinct (domain, op, input types, constant inputs) — nodes sharing them share
the verdict; at most ``limit`` probes per session.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.onnx_util import inferred_graph

if TYPE_CHECKING:
    import onnx

__all__ = ["probe_nodes"]

TAKEN = "taken"
REFUSED = "refused"

Signature: TypeAlias = tuple[
    str, str, tuple[tuple[str, int, tuple[int, ...]] | bytes, ...], tuple[bytes, ...]
]
"""What makes two nodes one probe: domain, op type, each input's type (a constant's dtype and
dims), each attribute (serialized)."""


def _one_node_models(
    model: onnx.ModelProto, names: set[str]
) -> dict[Signature, tuple[onnx.ModelProto, list[str]]]:
    """{signature: (one-node ModelProto, [node names sharing it])} for main-graph nodes."""
    from onnx import helper

    graph = inferred_graph(model)
    types = {vi.name: vi for vi in [*graph.input, *graph.value_info, *graph.output]}
    inits = {t.name: t for t in graph.initializer}
    out: dict[Signature, tuple[onnx.ModelProto, list[str]]] = {}
    for node in graph.node:
        if node.name not in names or any(a.type in (5, 10) for a in node.attribute):
            continue  # nodes with subgraphs (If/Loop) are not probed alone
        ins = [t for t in node.input if t]
        if any(t not in types and t not in inits for t in ins):
            continue  # an input of unknown type: nothing honest to build
        if any(t not in types for t in node.output if t):
            continue
        sig = (
            node.domain,
            node.op_type,
            tuple(
                ("const", inits[t].data_type, tuple(inits[t].dims))
                if t in inits
                else types[t].type.SerializeToString()
                for t in ins
            ),
            tuple(a.SerializeToString() for a in node.attribute),
        )
        if sig in out:
            out[sig][1].append(node.name)
            continue
        g = helper.make_graph(
            [node],
            "probe",
            [types[t] for t in dict.fromkeys(ins) if t not in inits],
            [types[t] for t in node.output if t],
            initializer=[inits[t] for t in dict.fromkeys(ins) if t in inits],
        )
        m = helper.make_model(g, opset_imports=list(model.opset_import))
        m.ir_version = model.ir_version
        out[sig] = (m, [node.name])
    return out


def probe_nodes(
    model_path: str,
    config: SessionConfig,
    names: Iterable[str],
    wanted: str,
    *,
    limit: int = 24,
    budget_s: float = 20.0,
) -> dict[str, str]:
    """{node name: 'taken' | 'refused'} for the given main-graph nodes: whether ``wanted``
    claims a one-node model of each (see the module docstring). Nodes not probed (limit,
    budget, unknown input types, subgraph holders, a probe that failed) are absent."""
    import onnx

    from ortlab.engine.session import build_session

    model = onnx.load(model_path, load_external_data=True)
    groups = _one_node_models(model, set(names))
    out: dict[str, str] = {}
    start = time.perf_counter()
    with cache.temp_dir("probe-") as folder:
        for k, (one, members) in enumerate(list(groups.values())[:limit]):
            if time.perf_counter() - start > budget_s:
                break
            path = folder / f"node{k}.onnx"
            onnx.save(one, str(path))
            try:
                sess, _ = build_session(
                    str(path),
                    config.with_(fallback="allow", level="disabled"),
                    model_name="probe",
                    log_severity=3,
                    extra_entries={"session.record_ep_graph_assignment_info": "1"},
                )
                eps = {str(sg.ep_name) for sg in sess.get_provider_graph_assignment_info()}
            except Exception:  # noqa: BLE001 - a probe that cannot build says nothing
                continue
            verdict = TAKEN if wanted in eps else REFUSED
            out.update(dict.fromkeys(members, verdict))
    return out
