"""The doctor's best verified configuration: a SessionConfig plus the model file to load, with
the verdict that earned it. Its own module so the search (which picks it) and the doctor's
result (which holds it) both import it, and neither imports the other."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ortlab.core.config import SessionConfig
from ortlab.core.display import render
from ortlab.core.eps import label, split_device
from ortlab.core.stats import Paired
from ortlab.diagnosis.counted import counted
from ortlab.diagnosis.facts import CandidateKey, Measured

__all__ = ["Best", "best_of", "loaded_only"]


@dataclass(frozen=True)
class Best:
    """The best verified configuration: a SessionConfig plus the model file to load."""

    config: SessionConfig
    variant: str
    model_path: str
    steps: list[str]
    paired: Paired
    """Its time ratio to the baseline with the interval (NaN bounds when the best is the
    baseline itself: nothing won) and the verdict that earned it."""
    cosine: float
    key: str = ""
    """The candidate it is (:func:`~ortlab.diagnosis.facts.counted` of it is its row); '' for
    the baseline."""
    objective: str = "latency"
    """What it was chosen for: 'latency' (``paired`` is its time ratio) or 'cpu' (``paired``
    is its CPU-per-run ratio, its latency verdict in :attr:`latency`)."""
    latency: Paired | None = None
    """Chosen for CPU: its time ratio to the baseline, beside the CPU verdict."""
    generation: Paired | None = None
    """A decoder's: the same settings generating against the baseline (decode tokens/s),
    the verdict that leads; ``paired`` is then one decode step's, evidence beside it."""
    caveat: str = ""
    """Why the verdict may not hold elsewhere ('' when none): it changes threads or spinning
    and was measured while other processes kept cores busy."""

    def snippet(self) -> str:
        """Python that builds this session with plain onnxruntime (the views write it)."""
        return str(render(self, "snippet"))

    def title(self) -> str:
        """'best verified configuration', and for what when it is chosen for CPU."""
        cpu = self.objective == "cpu"
        return "best verified configuration" + (" for CPU per run" if cpu else "")

    def __repr__(self) -> str:
        return f"<Best {render(self, 'text')}>"


def best_of(
    measured: Mapping[str, Measured],
    cfg: SessionConfig,
    model_path: str,
    accurate: Callable[[Measured], bool],
) -> Best:
    """The fastest ``accurate`` candidate whose gain holds (:attr:`Counted.holds
    <ortlab.diagnosis.facts.Counted.holds>`: once the combination stage ran, only what held up
    when re-measured there). Without one, the baseline itself, with why (no interval: nothing
    was compared with it)."""
    nan = float("nan")
    if "baseline" not in measured:  # a stage failed before the baseline was timed
        why = "the doctor stopped before it timed the baseline: nothing was compared"
        return Best(cfg, "original", model_path, [], Paired(1.0, nan, nan, why), 1.0)
    keys = dict.fromkeys(CandidateKey.parse(k).base for k in measured if k != "baseline")
    found = [c for k in keys if (c := counted(measured, k)) is not None]
    pool = [c for c in found if c.holds and accurate(c.row)]
    if not pool:
        final_ran = any(v.stage == "final" for v in measured.values())
        why = (
            "the screen's winners did not hold up when re-measured together with the baseline"
            if final_ran
            else "no candidate was measurably faster than the baseline"
        )
        return Best(
            measured["baseline"].config, "original", model_path, [], Paired(1.0, nan, nan, why), 1.0
        )
    b = min(pool, key=lambda c: c.row.paired.ratio)
    r = b.row
    return Best(r.config, r.variant, r.model_path, r.steps, r.paired, r.cosine, b.key)


def loaded_only(best: Best, active: Sequence[str]) -> tuple[Best, str]:
    """``best`` without the providers that did not load here (``active``: the session report's
    loaded EPs), and the note that says which were dropped ('' when none was): a configuration
    the doctor calls verified was measured without them."""
    providers = best.config.providers
    if isinstance(providers, str):  # "auto": ORT picks from what loads
        return best, ""
    loaded = {split_device(p)[0] for p in active}
    kept = [p for p in providers if split_device(p)[0] in loaded]
    dropped = [p for p in providers if p not in kept]
    if not dropped:
        return best, ""
    kept = kept or ["CPUExecutionProvider"]
    keep = {split_device(p)[0] for p in kept}
    config = best.config.with_(
        providers=kept,
        provider_options={k: dict(v) for k, v in best.config.provider_options if k in keep},
    )
    names = ", ".join(label(p) for p in dropped)
    note = (
        f"the best configuration leaves out {names}: it did not load here, so nothing was "
        f"measured with it; the best was measured on {', '.join(label(p) for p in kept)}"
    )
    return dataclasses.replace(best, config=config), note
