"""Why a node is not on the EP that was asked for, in ORT's and the EPs' own words.

One vocabulary for measured placements (:func:`ortlab.placement`) and predicted ones
(:func:`ortlab.whatif`): the raw sentence per node, a normalised ``category`` to group by, and a
``fix`` per group. Sources, all read from ORT's verbose session log:

- kernel EPs (CUDA, ROCm, WebGPU, DML…) while partitioning, at INFO:
  ``<EP> kernel not found in registries for Op type: X node name: N`` (no kernel for that op,
  opset or type), ``<EP> kernel not supported. Fallback to CPU execution provider for Op type:
  X node name: N`` (a kernel exists, not for this node), and ORT's CPU preference for shape
  subgraphs: ``ORT optimization- Force fallback to CPU execution for node: N because the CPU
  execution path is deemed faster …``;
- QNN's validation lines: ``Validation FAILED for 1 nodes in OrtNodeUnit … Node name: N …
  REASON : …``;
- a requested EP that did not load: every node's reason is that EP's load error;
- ORT's copy nodes (MemcpyFromHost/MemcpyToHost): inserted where a tensor crosses EPs.

The log parsers live with the rest of ORT's log parsing in :mod:`ortlab.engine.verdicts`
(the engine needs them too); they are tested with golden lines (tests/data/reasons, whatif).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ortlab.core.eps import label
from ortlab.engine.probe import REFUSED, TAKEN
from ortlab.engine.verdicts import parse_ort_fallbacks, parse_qnn_log

__all__ = [
    "category",
    "fix_for",
    "group_reasons",
    "node_reason",
    "parse_ort_fallbacks",
    "parse_qnn_log",
]

_QNN_INT_OPS = {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM"}

# ---------------------------------------------------------------------- grouping and fixes

_NOT_SUPPORTED = re.compile(
    r"Operators of type `([^`]+)` are not supported|op not supported: (?:[\w.]+:)?(\w+)|"
    r"no [\w ().]+ kernel for (\w+)|'s (\w+) kernel does not support"
)


def category(reason: str) -> str:  # noqa: PLR0911 - one return per kind of reason
    """A reason normalised for grouping: 'op not supported: X', 'dynamic shape', 'rank',
    'data type', 'shape computation kept on CPU', 'EP did not load', 'no reason given',
    'compile failed',
    'not in a partition', 'removed before partitioning', 'other'."""
    low = reason.lower()
    if not reason:
        return ""
    m = _NOT_SUPPORTED.search(reason)  # before shapes: fixing shapes would not help it
    if m:
        return f"op not supported: {next(g for g in m.groups() if g)}"
    if "no reason" in low:
        return "no reason given"
    if low.startswith("shape computation kept on cpu"):
        return "shape computation kept on CPU"
    if " did not load" in low:
        return "EP did not load"
    if "cannot get shape" in low or "dynamic" in low or "no fixed shape" in low:
        return "dynamic shape"
    if "rank" in low:
        return "rank"
    if "type" in low and (
        "data" in low or "dtype" in low or "unsupported" in low or "not supported" in low
    ):
        return "data type"
    if "compile failed" in low or "ep error" in low:
        return "compile failed"
    if "removed by ort" in low:
        return "removed before partitioning"
    if "partition" in low:
        return "not in a partition"
    return "other"


def fix_for(  # noqa: PLR0911, PLR0912 - one return per kind of reason
    cat: str, ep: str, dynamic: Sequence[str], *, fixed: bool
) -> str:
    """What to try for a group of nodes that fall back for reason ``cat``."""
    name = ep.removesuffix("ExecutionProvider")
    if cat == "dynamic shape":
        dims = ", ".join(dynamic) if dynamic else "the model's inputs"
        if fixed:
            return (
                "shapes inside the graph stay dynamic after fixing the inputs: run "
                "onnxruntime's symbolic shape inference, or re-export with static shapes"
            )
        return f"fix the input shapes: whatif(..., dims={{…}}) or feeds= for {dims}"
    if cat.startswith("op not supported: "):
        op = cat.split(": ", 1)[1]
        if op in _QNN_INT_OPS and name == "QNN":
            return (
                "quantize for the NPU (QDQ, static: onnxruntime.quantization with the QNN "
                "configuration) instead of dynamic quantization"
            )
        if name in ("CUDA", "ROCM", "Dml", "WebGpu", "Js", "MIGraphX", "CANN"):
            return (
                f"no {name} kernel: a newer onnxruntime may have one; else re-export "
                f"without {op} (or at another opset), or accept the copies around it"
            )
        return f"not supported by {name}: keep on CPU or replace the op"
    if cat == "no reason given":
        return (
            f"{name} said nothing about these nodes: check its supported-op list, or set "
            "session.disable_cpu_ep_fallback=1 so ORT names the first node it refuses"
        )
    if cat == "shape computation kept on CPU":
        return (
            "usually right (tiny integer tensors); if copies around them cost time, fix "
            "the input shapes (dims=) so ORT folds the shape arithmetic away"
        )
    if cat == "EP did not load":
        return f"make {name} load (see the session report's reason), or drop it from providers"
    if cat == "data type":
        return "quantize for the NPU (QDQ, static) or cast to a type the EP takes"
    if cat == "rank":
        return f"reshape to a lower rank, or keep on CPU ({name} limits tensor rank)"
    if cat == "compile failed":
        return (
            f"give {name} a target chip, e.g. qnn_options={{'htp_arch': '73', "
            "'soc_model': '60'} (a v73 HTP, Snapdragon 8 Gen 2), and check its log"
        )
    if cat.startswith("no prediction"):
        return (
            f"nothing here can predict {name}: run whatif where its device (or plugin) "
            "is, or try the qnn / nnapi / coreml targets"
        )
    if cat == "removed before partitioning":
        return "nothing to do: ORT folds or fuses these before any EP sees them"
    return ""


def group_reasons(
    rows: Iterable[tuple[str, str, str]], ep: str, dynamic: Sequence[str], *, fixed: bool
) -> list[dict[str, object]]:
    """(node, reason, category) triples → one group per category, largest first: reason
    (the category), nodes, examples (up to 3 names), fix, raw (the most common sentence as
    it was said). An empty category is :func:`category` of the reason."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for node, reason, given in rows:
        cat = given or category(reason)
        if reason and cat != "removed before partitioning":
            groups[cat].append((node, reason))
    out: list[dict[str, object]] = [
        {
            "reason": cat,
            "nodes": len(members),
            "examples": ", ".join(n for n, _ in members[:3]),
            "fix": fix_for(cat, ep, dynamic, fixed=fixed),
            "raw": Counter(r for _, r in members).most_common(1)[0][0],
        }
        for cat, members in groups.items()
    ]
    return sorted(out, key=lambda g: -int(str(g["nodes"])))


def node_reason(
    node: str,
    op_type: str,
    optimized: Sequence[str],
    verdicts: Mapping[str, str],
    ep: str,
    *,
    probe: str = "",
    logged: bool = True,
) -> str:
    """Why ``node`` (which became ``optimized`` in ORT's graph) is not on ``ep``, given the
    log ``verdicts`` (node → reason, '' for a node that passed validation) and, for EPs that
    say nothing per node, the one-node ``probe`` ('taken' / 'refused', see
    :mod:`ortlab.engine.probe`). One rule for measured placements and predicted ones."""
    short = label(ep)
    names = [node, *optimized]
    said = next(((k, verdicts[k]) for k in names if verdicts.get(k)), None)
    if said:
        return (
            said[1]
            if said[0] == node
            else (f"fused by ORT into {said[0]}, which falls back: {said[1]}")
        )
    if any(k in verdicts for k in names):
        return f"passed {short}'s validation but was left out of its partitions"
    if probe == REFUSED:
        return (
            f"op not supported: {op_type} — {short} refuses a one-node {op_type} with "
            f"this node's types and attributes (probed here; {short} logs no per-node "
            "reason)"
        )
    if probe == TAKEN:
        return (
            f"left out in context: {short} takes a one-node {op_type} like this one "
            "(probed here) but not this node where it sits (its partition rules, or a "
            "neighbour's shape or type)"
        )
    return f"not claimed by {short}: no reason in ORT's log" + (
        "" if logged else " (the EP logged no per-node verdicts)"
    )
