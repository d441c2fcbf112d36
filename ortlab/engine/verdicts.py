"""Per-node placement verdicts in ORT's and the EPs' own log lines, parsed (pure).

- kernel EPs (CUDA, ROCm, WebGPU, DML…) while partitioning, at INFO: ``<EP> kernel not found
  in registries for Op type: X node name: N``, ``<EP> kernel not supported. Fallback to CPU
  execution provider for Op type: X node name: N``, and ORT's CPU preference for shape
  subgraphs: ``ORT optimization- Force fallback to CPU execution for node: N because …``;
- QNN's validation lines: ``Validation FAILED for 1 nodes in OrtNodeUnit … Node name: N …
  REASON : …``.

The session keeps these lines (``SessionReport.why_log``); :mod:`ortlab.analysis.placement.reasons`
turns the verdicts into grouped reasons with fixes, and the placement task uses them to know
which nodes still need a probe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["parse_ort_fallbacks", "parse_qnn_log", "verdict_names"]

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

_KERNEL_EP_NAMES = {
    "CUDA": "CUDA",
    "ROCM": "ROCm",
    "WEBGPU": "WebGPU",
    "JS": "WebGPU (JS)",
    "DML": "DirectML",
    "MIGRAPHX": "MIGraphX",
    "CANN": "CANN",
}


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


def verdict_names(lines: Iterable[str]) -> set[str]:
    """Nodes a verdict line names (failed or passed): those need no probe."""
    lines = list(lines)
    return set(parse_ort_fallbacks(lines)) | set(parse_qnn_log(lines))
