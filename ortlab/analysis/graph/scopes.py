"""Control-flow scopes in the per-node join: which branch of an If ran, and the mapping of
original to optimized nodes made scope by scope.

An optimum *merged* decoder holds its whole network twice, in the two branches of one If on
``use_cache_branch``, with the same node and tensor names in both. ORT's profile names a
branch's nodes without their scope, and ortlab names the second copy of a repeated name
``name#1`` (in whichever order a graph lists its branches, which ORT's saved graph need not
keep). So, without scopes, a run of the branch with a past is credited to the other branch's
copies and the If itself looks eliminated. Here:

- :func:`map_scoped` maps each scope (the main graph, each branch or body) on its own, by the
  names as written in the model (``#k`` removed), tensors from outside the scope taken as
  given;
- :func:`branch_names` reads from the profile which branch of each If ran (the one whose
  names the profile holds, counting names only one branch has) and renames the profile's
  nodes to that branch's nodes, and says which scopes did not run.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from ortlab.analysis.graph.mapping import NodeMapping, OpNode, map_nodes

__all__ = ["BranchNames", "branch_names", "map_scoped", "raw_name"]

_SUFFIX = re.compile(r"#\d+$")


def raw_name(name: str) -> str:
    """The node's name as the model writes it (ortlab's ``#k`` for a repeated name removed)."""
    return _SUFFIX.sub("", name)


def map_scoped(
    original: Sequence[OpNode],
    optimized: Sequence[OpNode],
    initializers: Iterable[str] = (),
    graph_inputs: Iterable[str] = (),
) -> NodeMapping:
    """:func:`~ortlab.analysis.graph.mapping.map_nodes` scope by scope (see the module docstring);
    the plain mapping for a graph without control-flow bodies. Nodes of a scope the other
    graph lacks (ORT renamed the If that owns it) are mapped together, as without scopes."""
    inits, inputs = list(initializers), list(graph_inputs)
    if not any(n.parent for n in (*original, *optimized)):
        return map_nodes(original, optimized, inits, inputs)
    by_o: dict[str, list[OpNode]] = defaultdict(list)
    by_p: dict[str, list[OpNode]] = defaultdict(list)
    for n in original:
        by_o[n.parent].append(n)
    for n in optimized:
        by_p[n.parent].append(n)
    shared = [s for s in by_o if s in by_p]
    rest_o = [n for s, ns in by_o.items() if s not in by_p for n in ns]
    rest_p = [n for s, ns in by_p.items() if s not in by_o for n in ns]
    made = {t for n in (*original, *optimized) for t in n.outputs}
    parts = [_map_one(by_o[s], by_p[s], made, inits, inputs) for s in shared]
    if rest_o or rest_p:
        parts.append(map_nodes(rest_o, rest_p, inits, inputs))
    return _merge(parts)


def _map_one(
    orig: list[OpNode], opt: list[OpNode], made: set[str], inits: list[str], inputs: list[str]
) -> NodeMapping:
    """One scope, by raw names; tensors ``made`` outside it (in either graph) are its
    inputs."""
    outside = made - {t for n in (*orig, *opt) for t in n.outputs}
    back_o, back_p = _unique_raw(orig), _unique_raw(opt)
    mapping = map_nodes(
        [dataclasses.replace(n, name=back_o[1][n.name]) for n in orig],
        [dataclasses.replace(n, name=back_p[1][n.name]) for n in opt],
        inits,
        [*inputs, *sorted(outside)],
    )
    to_o, to_p = back_o[0], back_p[0]
    return NodeMapping(
        groups=[
            dataclasses.replace(
                g,
                optimized=[to_p[x] for x in g.optimized],
                original=[to_o[x] for x in g.original],
            )
            for g in mapping.groups
        ],
        status={to_o[k]: v for k, v in mapping.status.items()},
        original_to_optimized={
            to_o[k]: [to_p[x] for x in v] for k, v in mapping.original_to_optimized.items()
        },
        optimized_to_original={
            to_p[k]: [to_o[x] for x in v] for k, v in mapping.optimized_to_original.items()
        },
        unaccounted=[to_o[x] for x in mapping.unaccounted],
    )


def _unique_raw(nodes: list[OpNode]) -> tuple[dict[str, str], dict[str, str]]:
    """(raw -> scoped, scoped -> raw) for one scope; a raw name repeated inside the scope
    keeps its scoped name (still unique)."""
    count = Counter(raw_name(n.name) for n in nodes)
    fwd = {n.name: raw_name(n.name) if count[raw_name(n.name)] == 1 else n.name for n in nodes}
    return {v: k for k, v in fwd.items()}, fwd


def _merge(parts: list[NodeMapping]) -> NodeMapping:
    out = NodeMapping(groups=[], status={}, original_to_optimized={}, optimized_to_original={})
    for p in parts:
        out.groups.extend(p.groups)
        out.status.update(p.status)
        for k, v in p.original_to_optimized.items():
            out.original_to_optimized.setdefault(k, []).extend(v)
        for k, v in p.optimized_to_original.items():
            out.optimized_to_original.setdefault(k, []).extend(v)
        out.unaccounted.extend(p.unaccounted)
    return out


@dataclasses.dataclass(frozen=True)
class BranchNames:
    """The profile's node names as the final graph's scoped names, and the scopes that did
    not run with the one that did instead."""

    renamed: dict[str, str]
    """Profiled name -> the final node it is (only names that change)."""
    idle: dict[str, str]
    """Scope that did not run -> the scope of the same If that ran."""


def branch_names(final: Sequence[OpNode], profiled: Iterable[str]) -> BranchNames:
    """Which branch of each If in ``final`` ran, read from the profiled node names (see the
    module docstring)."""
    ran = set(profiled)
    scopes: dict[str, list[OpNode]] = defaultdict(list)
    for n in final:
        if n.parent:
            scopes[n.parent].append(n)
    if not scopes:
        return BranchNames({}, {})
    owners: dict[str, list[str]] = defaultdict(list)  # an If's path -> its branch scopes
    for s in scopes:
        owner, _, attr = s.rpartition("/")
        if attr in ("then_branch", "else_branch"):
            owners[owner].append(s)
    chosen = {s: any(raw_name(n.name) in ran for n in ns) for s, ns in scopes.items()}
    idle: dict[str, str] = {}
    for branches in owners.values():
        if len(branches) != 2:
            continue
        raws = [{raw_name(n.name) for n in scopes[b]} for b in branches]
        only = [len((raws[k] - raws[1 - k]) & ran) for k in (0, 1)]
        both = [len(raws[k] & ran) for k in (0, 1)]
        if only[0] == only[1] and both[0] == both[1]:
            continue  # nothing tells them apart (neither ran, or identical): leave as is
        win = 0 if (only[0], both[0]) > (only[1], both[1]) else 1
        chosen[branches[win]], chosen[branches[1 - win]] = True, False
        idle[branches[1 - win]] = branches[win]
    renamed: dict[str, str] = {}
    main = {n.name for n in final if not n.parent}
    for s, ns in scopes.items():
        if not chosen.get(s):
            continue
        for n in ns:
            r = raw_name(n.name)
            if r in ran and r != n.name and r not in main:
                renamed[r] = n.name
    return BranchNames(renamed, idle)
