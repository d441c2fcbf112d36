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

The parsers are pure and tested with golden log lines (tests/data/reasons, tests/data/whatif).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "category",
    "fix_for",
    "group_reasons",
    "parse_ort_fallbacks",
    "parse_qnn_log",
]

_QNN_INT_OPS = {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM"}
_PREFIX = re.compile(r"^\S+ \S+ \[[EWIV]:onnxruntime:[^\]]*\] ?")

# ---------------------------------------------------------------------- ORT's own lines

_NOT_FOUND = re.compile(
    r"(\w+) kernel not found in registries for Op type: (\S+) node name: (.*?)\s*$"
)
_KERNEL_REFUSED = re.compile(
    r"(\w+) kernel not supported\. Fallback to CPU execution provider for Op type: (\S+) "
    r"node name: (.*?)\s*$"
)
_FORCED = re.compile(r"Force fallback to CPU execution for node: (.*?)(?: because .*)?\s*$")
_FORCED_BY_OPTION = re.compile(r"Force CPU execution for node: (.*?)\s*$")

_KERNEL_EP_NAMES = {"CUDA": "CUDA", "ROCM": "ROCm", "WEBGPU": "WebGPU", "JS": "WebGPU (JS)",
                    "DML": "DirectML", "MIGRAPHX": "MIGraphX", "CANN": "CANN"}  # fmt: skip


def parse_ort_fallbacks(lines: Iterable[str]) -> dict[str, str]:
    """ORT's partitioning-time verdicts: node name (in the graph ORT partitions, after level-1
    optimization) → why it went to the CPU. A node named twice keeps its first, most
    specific, reason (no kernel beats the shape-subgraph preference)."""
    out: dict[str, str] = {}
    for raw in lines:
        line = _PREFIX.sub("", raw).strip()
        if m := _NOT_FOUND.search(line):
            ep = _KERNEL_EP_NAMES.get(m.group(1).upper(), m.group(1))
            out.setdefault(
                m.group(3),
                f"no {ep} kernel for {m.group(2)} at this node's opset "
                f"and types (ORT: kernel not found in registries)",
            )
        elif m := _KERNEL_REFUSED.search(line):
            ep = _KERNEL_EP_NAMES.get(m.group(1).upper(), m.group(1))
            out.setdefault(
                m.group(3),
                f"{ep}'s {m.group(2)} kernel does not support this node "
                "(attributes or input types): op not supported here "
                f"(ORT: kernel not supported)",
            )
        elif m := _FORCED.search(line):
            out.setdefault(
                m.group(1),
                "shape computation kept on CPU: its inputs are on the "
                "CPU and ORT deems the CPU faster than a copy to the EP",
            )
        elif m := _FORCED_BY_OPTION.search(line):
            out.setdefault(m.group(1), "forced to CPU by the EP's force_cpu_node_names option")
    return out


# ---------------------------------------------------------------------- QNN's log

_UNIT = re.compile(r"Validation (FAILED|PASSED) for \d+ nodes in OrtNodeUnit")
_MEMBER = re.compile(r"Operator type: (\S+) Node name: (.*?) Node index: \d+\s*$")
_REASON = re.compile(r"REASON\s*:\s*(.*)$")


def parse_qnn_log(lines: Iterable[str]) -> dict[str, str]:
    """QNN's verbose per-node verdicts: node name (partitioning-time graph) → reason, '' for
    nodes that passed validation. An OrtNodeUnit (a QDQ group) lists several nodes before its
    ``REASON :`` line; each gets it. QNN validates twice per session: repeats are merged, and
    a node that failed once keeps its failure."""
    out: dict[str, str] = {}
    members: list[str] = []
    failed = False
    for line in lines:
        unit = _UNIT.search(line)
        if unit:
            failed, members = unit.group(1) == "FAILED", []
            continue
        member = _MEMBER.search(line)
        if member:
            name = member.group(2)
            members.append(name)
            if not failed:
                out.setdefault(name, "")
            continue
        reason = _REASON.search(line)
        if reason and failed:
            text = reason.group(1).strip()
            for name in members:
                old = out.get(name, "")
                if not old:
                    out[name] = text
                elif text not in old.split("; "):
                    out[name] = f"{old}; {text}"
            members = []
    return out


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
    if "no reason in" in low:
        return "no reason given"
    if low.startswith("shape computation kept on cpu"):
        return "shape computation kept on CPU"
    if " did not load" in low:
        return "EP did not load"
    if "cannot get shape" in low or "dynamic" in low or "no fixed shape" in low:
        return "dynamic shape"
    if "rank" in low:
        return "rank"
    if "type" in low and ("data" in low or "dtype" in low or "unsupported" in low or
                          "not supported" in low):  # fmt: skip
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
            return ("quantize for the NPU (QDQ, static: onnxruntime.quantization with the QNN "
                    "configuration) instead of dynamic quantization")  # fmt: skip
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
        return (f"nothing here can predict {name}: run whatif where its device (or plugin) "
                "is, or try the qnn / nnapi / coreml targets")  # fmt: skip
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
        {"reason": cat, "nodes": len(members),
         "examples": ", ".join(n for n, _ in members[:3]),
         "fix": fix_for(cat, ep, dynamic, fixed=fixed),
         "raw": Counter(r for _, r in members).most_common(1)[0][0]}
        for cat, members in groups.items()
    ]  # fmt: skip
    return sorted(out, key=lambda g: -int(str(g["nodes"])))


def first_reason(names: Iterable[str], verdicts: Mapping[str, str]) -> tuple[str, str] | None:
    """The first of ``names`` (a node, then the final nodes it became) with a logged reason."""
    return next(((k, verdicts[k]) for k in names if verdicts.get(k)), None)
