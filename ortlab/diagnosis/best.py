"""The doctor's best verified configuration: a SessionConfig plus the model file to load, with
the verdict that earned it. Its own module so the search (which picks it) and the doctor's
result (which holds it) both import it, and neither imports the other."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ortlab.core.config import SessionConfig
from ortlab.core.stats import Paired

if TYPE_CHECKING:
    from ortlab.diagnosis.facts import Measured

__all__ = ["Best", "best_of"]


@dataclass(frozen=True)
class Best:
    """The best verified configuration: a SessionConfig plus the model file to load."""

    config: dict[str, Any]
    variant: str
    model_path: str
    steps: list[str]
    paired: Paired
    """Its time ratio to the baseline with the interval (NaN bounds when the best is the
    baseline itself: nothing won) and the verdict that earned it."""
    cosine: float

    @property
    def session_config(self) -> SessionConfig:
        return SessionConfig.from_json(self.config)

    def snippet(self) -> str:
        """Python that builds this session with plain onnxruntime."""
        head = [f"# ortlab doctor: best verified configuration ({self.paired.verdict})"]
        if self.variant != "original":
            head.append(f"# model variant {self.variant!r}, made by: " + "; ".join(self.steps))
        return "\n".join(head) + "\n" + self.session_config.snippet(self.model_path)

    def __repr__(self) -> str:
        return f"<Best {self.variant} · {self.session_config.label()}: {self.paired.verdict}>"


def best_of(
    measured: Mapping[str, Measured],
    cfg: SessionConfig,
    model_path: str,
    accurate: Callable[[Measured], bool],
) -> Best:
    """The fastest ``accurate`` candidate that is significantly faster than the baseline; once
    the combination stage ran, only what held up when re-measured there counts. Without one,
    the baseline itself, with why (no interval: nothing was compared with it)."""
    nan = float("nan")
    if "baseline" not in measured:  # a stage failed before the baseline was timed
        why = "the doctor stopped before it timed the baseline: nothing was compared"
        return Best(cfg.to_dict(), "original", model_path, [], Paired(1.0, nan, nan, why), 1.0)
    ok = [v for v in measured.values() if v.faster and accurate(v)]
    final_ran = any(v.stage == "final" for v in measured.values())
    pool = [v for v in ok if v.stage == "final"] if final_ran else ok
    if not pool:
        why = ("the screen's winners did not hold up when re-measured together with the "
               "baseline" if final_ran else
               "no candidate was measurably faster than the baseline")  # fmt: skip
        return Best(measured["baseline"].config, "original", model_path, [],
                    Paired(1.0, nan, nan, why), 1.0)  # fmt: skip
    b = min(pool, key=lambda v: v.paired.ratio)
    return Best(b.config, b.variant, b.model_path, b.steps, b.paired, b.cosine)
