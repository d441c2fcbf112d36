"""What the graph view draws, as data: a node (with its EP, time, error and roofline fields
joined in), an edge (marked where it crosses EPs or is drawn as a ghost stub) and a group (a
name scope or a body, with its nodes' totals). :mod:`ortlab.analysis.graph.data` builds them."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["GraphEdge", "GraphGroup", "GraphNode"]


@dataclass(frozen=True)
class GraphNode:
    id: int
    name: str
    op_type: str
    domain: str
    group: str
    """Id of the innermost scope group ('' for the root)."""
    provider: str = ""
    us_per_run: float = 0.0
    """Its time: the median run's self time, profiling on, credited once (the placement join's
    ``us_per_run``; a kernel computing several original nodes is split among them)."""
    share: float = 0.0
    status: str = ""
    optimized: list[str] = field(default_factory=list)
    group_us_per_run: float = 0.0
    """The whole final kernel(s) it became part of (``optimized``): what the Profile tab lists
    under the kernel's name. Equal to ``us_per_run`` for a node that is a kernel of its own."""
    time_source: str = ""
    """How its time was credited (``measured``, ``group of 3 (even split)``, …)."""
    partition: int = -1
    """EP partition id from the placement (-1 without one)."""
    sqnr_db: float | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    """Why the node is not on the EP the session wanted (placement / whatif ``reason``)."""
    output_bytes: int = -1
    """Bytes of the outputs of the final node(s) it became part of (placement join)."""
    delta_us: float | None = None
    """Run B - run A for this node (``ortlab.diff``), µs per run; None without a diff."""
    diff_verdict: str = ""
    predicted: bool = False
    """The provider is a prediction (``ortlab.whatif``: compiled or rules), not a run: the
    view draws such nodes hatched, and shows no time for them."""
    achieved_fraction: float | None = None
    """Its kernel's ``RoofRow.achieved_fraction`` (``ortlab.roofline``; the time-weighted mean
    over several kernels, see :mod:`ortlab.analysis.graph.roof`); None without one."""
    roof_bound: str = ""
    """'compute' or 'memory': what bounds that kernel ('' without a fraction)."""
    roof_ceiling: str = ""
    """That kernel's attainable rate as text ('114 GFLOP/s'); '' for a mean over several."""
    body: str = ""
    """The If/Loop/Scan body it sits in ('<owner>/then_branch'; '' at the top): where the
    tensors it reads are looked up first (:func:`scoped_producers`)."""


@dataclass(frozen=True)
class GraphEdge:
    src: int
    dst: int
    tensor: str
    boundary: bool
    """Producer and consumer run on different execution providers."""
    ghost: bool
    """The tensor feeds many nodes: drawn as a stub at the consumer, not a long edge."""


@dataclass(frozen=True)
class GraphGroup:
    id: str
    label: str
    parent: str
    depth: int
    size: int
    """Nodes inside, nested groups included."""
    providers: dict[str, int]
    us_per_run: float
    boundaries: int = 0
    """Edges inside the group whose two ends run on different EPs: shown on the collapsed
    group, so a fallback inside it is not hidden."""
    share: float = 0.0
    """Its nodes' share of the time (the sum of their ``share``): 0 without a profile."""
    achieved_fraction: float | None = None
    """Its nodes' roofline fractions, time-weighted (by their ``us_per_run``): the colour of
    the collapsed group; None when none of its nodes has one."""
    sqnr_db: float | None = None
    """The worst (lowest) output SQNR of its nodes: a collapsed group shows where the error
    is inside it; None when none of its nodes has one."""
