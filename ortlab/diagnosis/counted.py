"""The measurement that counts for one candidate, and how it was taken (:class:`Counted`): its
re-measurement in the final stage when there is one, else its screen row. Every rule quotes it
and :func:`~ortlab.diagnosis.best.best_of` picks from it, so a finding never says what the
bottom line denies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ortlab.diagnosis.facts import FINAL_MARK, CandidateKey, Measured
from ortlab.diagnosis.finding import Gain

__all__ = ["REMEASURED", "SCREEN", "SCREENED_ONLY", "Counted", "counted", "measured_gain"]

REMEASURED, SCREEN, SCREENED_ONLY = "re-measured", "screen", "screened only"


@dataclass(frozen=True)
class Counted:
    """The measurement that counts for one candidate, and how it was taken. The one home of
    that choice: every rule quotes it and :func:`~ortlab.diagnosis.best.best_of` picks from
    it, so a finding never says what the bottom line denies."""

    key: str
    """The candidate's key without the final mark (``threads:1``; ``settings``)."""
    row: Measured
    """The row whose ratio, interval and verdict are quoted."""
    status: str
    """'re-measured' (timed again with the baseline in the final stage: that row counts),
    'screen' (the final stage did not run: the screen is the verdict) or 'screened only'
    (the final stage ran and did not re-measure this candidate: not verified)."""
    screen: Measured | None = None
    """The candidate's screen row, when ``row`` is its re-measurement."""

    @property
    def holds(self) -> bool:
        """Faster, and verified: re-measured with the baseline, or screened when nothing was."""
        return self.row.faster and self.status != SCREENED_ONLY

    @property
    def did_not_hold(self) -> bool:
        """Faster in the screen, not when re-measured together with the baseline."""
        return self.screen is not None and self.screen.faster and not self.row.faster

    def word(self) -> str:
        """'faster', 'no faster', 'undecided (…)', or what the screen said and why it does not
        count: 'faster in the screen, not when re-measured: no faster'."""
        if self.did_not_hold:
            return f"faster in the screen, not when re-measured: {self.row.speed_word()}"
        if self.status == SCREENED_ONLY:
            return f"{self.row.speed_word()} in the screen (not re-measured)"
        return self.row.speed_word()

    def verdict(self) -> str:
        """The verdict sentence a finding quotes as its gain."""
        p = self.row.paired
        if self.did_not_hold:
            assert self.screen is not None
            return (
                f"faster in the screen ({self.screen.paired.verdict}), but it did not hold "
                f"when re-measured together with the baseline: {p.verdict}"
            )
        if self.status == SCREENED_ONLY and self.row.slower:
            return f"{p.verdict} (in the screen; not re-measured)"
        if self.status == SCREENED_ONLY:
            return (
                f"screened only, not re-measured with the baseline in the final stage "
                f"(the best counts only what was): {p.verdict}"
            )
        return p.verdict

    def gain(self, baseline_ms: float) -> Gain:
        """A finding's gain fields: the verdict, the ratio and interval, the milliseconds
        saved (only when the gain holds) and the key."""
        p = self.row.paired
        saved = max(baseline_ms - self.row.p50_ms, 0.0) if self.holds else 0.0
        return {
            "gain": self.verdict(),
            "ratio": p.ratio,
            "low": p.low,
            "high": p.high,
            "saved_ms": saved,
            "key": self.key,
        }


def counted(measured: Mapping[str, Measured], key: str) -> Counted | None:
    """The measurement that counts for candidate ``key`` (with or without the final mark):
    its re-measurement in the final stage when there is one — its own ``+final`` row, or a
    final row of the same model and config under another key (``settings`` when the combined
    settings are this one change) —; else its screen row, marked 'screened only' when the
    final stage ran without it. None when it was not measured."""
    base = CandidateKey.parse(key).base
    screen = measured.get(base)
    finals = [m for m in measured.values() if m.stage == "final"]
    again = measured.get(base + FINAL_MARK)
    if again is None and screen is not None and screen.stage != "final":
        again = next(
            (m for m in finals if m.model_path == screen.model_path and m.config == screen.config),
            None,
        )
    if again is not None:
        return Counted(base, again, REMEASURED, screen if screen is not again else None)
    if screen is None:
        return None
    if screen.stage == "final":
        return Counted(base, screen, REMEASURED)
    return Counted(base, screen, SCREENED_ONLY if finals else SCREEN)


def measured_gain(measured: Mapping[str, Measured], key: str, baseline_ms: float) -> Gain:
    """A finding's gain fields for candidate ``key``: what :func:`counted` says of it."""
    c = counted(measured, key)
    return c.gain(baseline_ms) if c is not None else {"gain": "not measured"}
