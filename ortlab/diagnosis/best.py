"""The doctor's best verified configuration: a SessionConfig plus the model file to load, with
the verdict that earned it. Its own module so the search (which picks it) and the doctor's
result (which holds it) both import it, and neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ortlab.core.config import SessionConfig

__all__ = ["Best"]


@dataclass(frozen=True)
class Best:
    """The best verified configuration: a SessionConfig plus the model file to load."""

    config: dict[str, Any]
    variant: str
    model_path: str
    steps: list[str]
    ratio: float
    low: float
    """Interval bounds of ``ratio``; NaN when the best is the baseline itself (nothing won)."""
    high: float
    verdict: str
    cosine: float

    @property
    def session_config(self) -> SessionConfig:
        return SessionConfig.from_json(self.config)

    def snippet(self) -> str:
        """Python that builds this session with plain onnxruntime."""
        head = [f"# ortlab doctor: best verified configuration ({self.verdict})"]
        if self.variant != "original":
            head.append(f"# model variant {self.variant!r}, made by: " + "; ".join(self.steps))
        return "\n".join(head) + "\n" + self.session_config.snippet(self.model_path)

    def __repr__(self) -> str:
        return f"<Best {self.variant} · {self.session_config.label()}: {self.verdict}>"
