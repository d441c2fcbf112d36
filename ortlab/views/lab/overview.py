"""The Overview's headline: the last run's answer to "what is slow, and what should I try".

Its latency (the median run with its interval, from the benchmark), the three slowest nodes
with their shares (the profile's node time, ``ProfileResult.top_nodes``), where the nodes ran
(the placement's summary) and the doctor's verified best when it ran. Every number is read from
its result's own field and said with its conditions; nothing is recomputed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortlab.core.eps import alias
from ortlab.core.units import fmt_us
from ortlab.views.benchmark import load_text, p50_text
from ortlab.views.doctor import best_verdict
from ortlab.views.generate import generation_headline
from ortlab.views.html import esc
from ortlab.views.lab.kernelnodes import carriers_first
from ortlab.views.profile import kernel_label

if TYPE_CHECKING:
    from ortlab.analysis.benchmark import BenchmarkResult
    from ortlab.analysis.generation.generate import GenerationResult
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.diagnosis.doctor import DoctorResult

__all__ = ["Headline"]

TOP = 3
"""Nodes the headline names."""


@dataclass(frozen=True, eq=False)
class Headline:
    """The Overview's first lines for one run. ``benchmark``, ``profile`` and ``placement``
    are the run's results (None before the first run or after a first run that failed);
    ``doctor`` the Lab's last doctor result; ``settings`` the run's History label."""

    benchmark: BenchmarkResult | None = None
    profile: ProfileResult | None = None
    placement: PlacementResult | None = None
    doctor: DoctorResult | None = None
    settings: str = ""
    failed: bool = False
    generation: GenerationResult | None = None
    """A decoder's last generation (the Generate tab's): its TTFT and tokens/s lead."""
    generation_said: str = "the Generate tab's last run"
    """Which generation that is (the short one a decoder's first run ends with, or the
    Generate tab's)."""

    def _latency(self, b: BenchmarkResult) -> str:
        s = b.stats
        return (
            f"<div><b>Latency</b>: {esc(p50_text(b))}<br><small>median of {s.count} runs after "
            f"{b.warmup} warm-up, profiling off · {esc(self.settings)} · {esc(load_text(b))}"
            "</small></div>"
        )

    def _nodes(self, p: ProfileResult, pl: PlacementResult) -> str:
        """The slowest nodes (rows of ``ProfileResult.top_nodes``)."""
        fused = carriers_first(pl, p)
        items = "".join(
            f"<li><b>{esc(kernel_label(r.node, fused.get(r.node, ())))}</b> · {esc(r.op_type)}"
            f" · {fmt_us(r.us_per_run)} µs · {r.share:.1%}</li>"
            for r in p.top_nodes(TOP).itertuples()
        )
        return (
            "<div><b>Slowest nodes</b> <small>(each node's median µs per run and its share of "
            f"the median run's node time; {esc(p.conditions, 600)}; the Profile tab lists them "
            f"all)</small><ol style='margin:2px 0'>{items}</ol></div>"
        )

    def _split(self, pl: PlacementResult) -> str:
        """Where the nodes ran (``PlacementResult.summary``)."""
        parts = "; ".join(
            f"{esc(alias(r.provider))}: {r.nodes} nodes, {r.time_share:.1%} of node time"
            for r in pl.summary().itertuples()
        )
        return (
            f"<div><b>Where it ran</b>: {parts} <small>(the placement's {pl.runs} "
            "profiled runs; the Placement tab has every node)</small></div>"
        )

    def _generation(self) -> str:
        g = self.generation
        if g is None:
            return ""
        return (
            f"<div><b>Generation</b>: {esc(generation_headline(g), 600)} "
            f"<small>({esc(self.generation_said, 300)})</small></div>"
        )

    def _best(self) -> str:
        d = self.doctor
        if d is None:
            return (
                "<div><b>What to try</b>: the Doctor tab times settings and model variants "
                "against this one, interleaved, and keeps only what is verified faster.</div>"
            )
        best = d.best
        what = "the original model" if best.variant == "original" else best.variant
        cosine = "" if best.variant == "original" else f"; output cosine {best.cosine:.4f}"
        first = f"<br>first finding: {esc(d.findings[0].title)}" if d.findings else ""
        return (
            f"<div><b>Doctor's verified best</b>: {esc(what)} · "
            f"{esc(best.config.label())} — {esc(best_verdict(best), 800)}{esc(cosine)} "
            f"<small>(Apply best in the Doctor tab runs it here)</small>{first}</div>"
        )

    def _repr_html_(self) -> str:
        b, p, pl = self.benchmark, self.profile, self.placement
        if b is None or p is None or pl is None:
            said = (
                "the last run failed (its error is above the tabs)"
                if self.failed
                else ("no run yet")
            )
            return (
                f"<div class='ortlab-headline'><i>{said}</i>{self._generation()}"
                f"{self._best()}</div>"
            )
        return (
            "<div class='ortlab-headline' style='margin-bottom:8px'>"
            + self._generation()
            + self._latency(b)
            + self._nodes(p, pl)
            + self._split(pl)
            + self._best()
            + "</div>"
        )

    def __repr__(self) -> str:
        if self.benchmark is None:
            return "<Headline: no run>"
        return f"<Headline {p50_text(self.benchmark)}>"
