"""What the doctor says of a session: a :class:`Finding` (a problem, its evidence, the fix
and the code that applies it) and the measured :class:`Gain` it quotes, in the finding's own
field names (the verdict sentence, the ratio with its interval, the milliseconds saved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

__all__ = ["Finding", "Gain"]


class Gain(TypedDict):
    """A finding's gain fields (:class:`Finding`'s names): the verdict sentence, and where a
    candidate was measured its ratio with the interval, the milliseconds saved and its key."""

    gain: str
    ratio: NotRequired[float]
    low: NotRequired[float]
    high: NotRequired[float]
    saved_ms: NotRequired[float]
    key: NotRequired[str]


@dataclass(frozen=True)
class Finding:
    """One problem found in the session, with its evidence, fix and (where measurable) gain."""

    rule: str
    title: str
    evidence: str
    fix: str
    code: str
    """Python that applies the fix (ortlab or plain onnxruntime)."""
    gain: str
    """The measured effect of the fix as ortlab's verdict sentence, or why it was not measured."""
    ratio: float | None = None
    """Time ratio fixed / baseline with its interval (coverage ≥ 95 %, see ``ortlab.paired_ratio``;
    NaN bounds with too few rounds); None when not measured."""
    low: float | None = None
    high: float | None = None
    saved_ms: float = 0.0
    """Milliseconds per run the fix saves (measured); findings sort by this, most costly first."""
    severity: str = "warning"
    """'error' (the session is not what was asked), 'warning', or 'info'."""
    nodes: list[str] = field(default_factory=list)
    """Node names the finding is about (the graph view highlights them)."""
    key: str = ""
    """The candidate whose measurement ``gain`` and ``ratio`` quote ('' when none): what
    :func:`~ortlab.diagnosis.facts.counted` returns for it, the same row
    :func:`~ortlab.diagnosis.best.best_of` reads."""
