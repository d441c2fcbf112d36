"""The graph's wire form: :class:`~ortlab.analysis.graph.data.GraphData` packed into columns of
indices into one front-coded table of strings, which wire.js unpacks in the browser (one
format, written here and read there)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from ortlab.analysis.graph.data import GHOST_FANOUT, GraphData
from ortlab.views.colors import palette

__all__ = ["PACKED_FORMAT", "pack"]

PACKED_FORMAT = "ortlab.graph.packed/1"


def _utf16_len(text: str) -> int:
    """Length in UTF-16 code units: what JavaScript's String.slice counts."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _shared_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (a binary search on slices: no per-character loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Strings:
    """Every string of a packed graph, once, front-coded: each one as the length of the
    prefix it shares with the one before (in UTF-16 units) and the rest. Two sorted runs: the
    vocabulary (op types, EPs, attribute names, types: few, so their indices are short) and
    the names (sorted node, tensor and scope names share long prefixes, so the table is a
    fraction of their text)."""

    def __init__(self, vocabulary: Iterable[str], names: Iterable[str]) -> None:
        words = sorted(set(vocabulary) | {""})
        known = set(words)
        self.sorted = words + sorted({s for s in names if s not in known})
        self.index = {s: i for i, s in enumerate(self.sorted)}

    def table(self) -> dict[str, list[int] | list[str]]:
        prefix: list[int] = []
        suffix: list[str] = []
        prev = ""
        for s in self.sorted:
            k = _shared_prefix(prev, s)
            prefix.append(_utf16_len(s[:k]) if k else 0)
            suffix.append(s[k:])
            prev = s
        return {"prefix": prefix, "suffix": suffix}


T = TypeVar("T")


def _column(values: list[T], default: T) -> list[T] | None:
    """A column, or None when every value is the default (the browser fills it in)."""
    return values if any(v != default for v in values) else None


_PACKED_AS_IS = (
    "model",
    "providers",
    "expanded",
    "has_time",
    "has_quant",
    "has_memory",
    "has_diff",
    "has_roofline",
    "notes",
    "constants",
    "identities",
    "inputs",
    "outputs",
)


def pack(g: GraphData) -> dict[str, object]:
    """The view's wire form (the widget's ``data`` trait and the HTML pages): the same facts
    as ``g.to_dict()``, in columns of indices into one table of strings. A 50,000-node model
    is 48 MB as ``to_dict`` JSON, an order of magnitude less packed, and the browser reads it
    that much sooner. wire.js ``unpack`` restores the ``to_dict`` form; the browser tests check
    the two agree."""
    nodes, groups = g.nodes, g.groups
    strings = _Strings(
        vocabulary=(
            *(
                x
                for n in nodes
                for x in (
                    n.op_type,
                    n.domain,
                    n.provider,
                    n.status,
                    n.reason,
                    n.diff_verdict,
                    n.time_source,
                    n.roof_bound,
                    n.roof_ceiling,
                    *n.attrs,
                )
            ),
            *(p for gr in groups for p in gr.providers),
            *g.tensors.values(),
        ),
        names=(
            *(
                x
                for n in nodes
                for x in (
                    n.name,
                    n.body,
                    *n.optimized,
                    *n.inputs,
                    *n.outputs,
                    *n.attrs.values(),
                )
            ),
            *(x for gr in groups for x in (gr.id, gr.label, gr.parent)),
            *g.tensors,
        ),
    )
    ix = strings.index
    group_ix = {gr.id: i for i, gr in enumerate(groups)}
    return {
        "format": PACKED_FORMAT,
        **{k: getattr(g, k) for k in _PACKED_AS_IS},
        "ghost_fanout": GHOST_FANOUT,
        "colors": palette(),  # the one palette (views/colors.py): overlays.js draws with it
        "strings": strings.table(),
        "nodes": {  # a column of defaults only is None
            "count": len(nodes),
            "name": [ix[n.name] for n in nodes],
            "op_type": [ix[n.op_type] for n in nodes],
            "domain": _column([ix[n.domain] for n in nodes], 0),
            "group": [group_ix.get(n.group, -1) for n in nodes],
            "provider": _column([ix[n.provider] for n in nodes], 0),
            "us_per_run": _column([n.us_per_run for n in nodes], 0.0),
            "share": _column([n.share for n in nodes], 0.0),
            "status": _column([ix[n.status] for n in nodes], 0),
            "optimized": _column([[ix[o] for o in n.optimized] for n in nodes], []),
            "group_us_per_run": _column([n.group_us_per_run for n in nodes], 0.0),
            "time_source": _column([ix[n.time_source] for n in nodes], 0),
            "partition": _column([n.partition for n in nodes], -1),
            "sqnr_db": _column([n.sqnr_db for n in nodes], None),
            "body": _column([ix[n.body] for n in nodes], 0),
            "inputs": [[ix[t] for t in n.inputs] for n in nodes],
            "outputs": [[ix[t] for t in n.outputs] for n in nodes],
            "attrs": _column([[ix[x] for kv in n.attrs.items() for x in kv] for n in nodes], []),
            "reason": _column([ix[n.reason] for n in nodes], 0),
            "output_bytes": _column([n.output_bytes for n in nodes], -1),
            "delta_us": _column([n.delta_us for n in nodes], None),
            "diff_verdict": _column([ix[n.diff_verdict] for n in nodes], 0),
            "predicted": _column([int(n.predicted) for n in nodes], 0),
            "achieved_fraction": _column([n.achieved_fraction for n in nodes], None),
            "roof_bound": _column([ix[n.roof_bound] for n in nodes], 0),
            "roof_ceiling": _column([ix[n.roof_ceiling] for n in nodes], 0),
        },
        # No edges: the browser derives them from inputs and outputs as graph_data does
        # (producer -> each consumer; ghost above ghost_fanout readers; boundary across EPs).
        "groups": {
            "id": [ix[gr.id] for gr in groups],
            "label": [ix[gr.label] for gr in groups],
            "parent": [ix[gr.parent] for gr in groups],
            "depth": [gr.depth for gr in groups],
            "size": [gr.size for gr in groups],
            "providers": [
                [x for kv in gr.providers.items() for x in (ix[kv[0]], kv[1])] for gr in groups
            ],
            "us_per_run": [gr.us_per_run for gr in groups],
            "boundaries": [gr.boundaries for gr in groups],
            "share": [gr.share for gr in groups],
            "achieved_fraction": _column([gr.achieved_fraction for gr in groups], None),
            "sqnr_db": _column([gr.sqnr_db for gr in groups], None),
        },
        "tensors": {
            "name": [ix[t] for t in g.tensors],
            "type": [ix[t] for t in g.tensors.values()],
        },
    }
