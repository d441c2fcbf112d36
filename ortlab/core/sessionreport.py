"""What ORT did when it built a session, as data: the :class:`SessionReport` (providers
requested and active, fallbacks with ORT's reasons, its own log lines) that the engine fills
(``ortlab.engine.session``) and the views render without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortlab.core.eps import alias as _short
from ortlab.core.eps import split_device
from ortlab.core.result import Result, Table
from ortlab.core.runtime import Device

__all__ = ["ProviderIssue", "SessionReport"]


@dataclass(frozen=True)
class ProviderIssue:
    provider: str
    reason: str


@dataclass(frozen=True)
class SessionReport(Result):
    """What ORT did when building the session: providers, fallbacks, its own words."""

    requested: list[str]
    active: list[str]
    """``session.get_providers()``: the providers the session really has."""
    missing: list[ProviderIssue]
    """Requested providers that did not load, each with ORT's reason."""
    level: str
    create_ms: float
    ort_version: str
    log: list[str] = field(default_factory=list)
    """ORT's own output during creation (fd level), ANSI removed, repeats summarised."""
    notes: list[str] = field(default_factory=list)
    auto_reasons: list[str] = field(default_factory=list)
    """When providers='auto': why each provider was picked or passed over."""
    devices: list[Device] = field(default_factory=list)
    placements: dict[str, str] = field(default_factory=dict)
    """From ORT's verbose "Node placements" block (only when built with log_severity=0)."""
    all_on: str = ""
    """The EP of ORT's verbose 'All nodes placed on [EP]' line, when one EP runs every node
    (``placements`` then lists none; only when built with log_severity=0)."""
    fired: dict[str, int] = field(default_factory=dict)
    """Graph transformers that modified the graph (only when built with log_severity<=1)."""
    transformers: list[str] = field(default_factory=list)
    """Every graph transformer ORT ran, fired or not (only when built with log_severity<=1):
    the names ``SessionConfig.disabled_optimizers`` takes."""
    why_log: list[str] = field(default_factory=list)
    """ORT's and the EPs' per-node placement verdicts (kernel not found, forced to CPU, QNN's
    validation), verbatim (only when built with log_severity<=1)."""
    stages_ms: dict[str, float] = field(default_factory=dict)
    """Session creation per stage (load, optimize, partition & plan, initializers & kernels)
    from ORT's log timestamps (only when built with log_severity<=1); see ``session_stages``."""
    transformer_ms: dict[str, float] = field(default_factory=dict)
    """Each graph transformer's own time, summed over its steps (log_severity<=1)."""

    @property
    def fallback(self) -> bool:
        return bool(self.missing)

    @property
    def wanted(self) -> str:
        """The EP this session wanted first: the first requested provider that is not the CPU
        (for a selection policy or ``auto``, the first active one); '' when only the CPU was
        asked for. Placement reasons say why a node is not on it."""
        cpu = "CPUExecutionProvider"
        for p in self.requested:
            ep = split_device(p)[0]
            if not p.startswith("policy:") and ep != cpu:
                return ep
        return next((p for p in self.active if p != cpu), "")

    def to_pandas(self) -> Table:
        """One row per requested provider: provider, loaded, reason (ORT's words when it did
        not load)."""
        import pandas as pd

        why = {m.provider: m.reason for m in self.missing}
        return pd.DataFrame(
            [
                {"provider": p, "loaded": p in self.active, "reason": why.get(p, "")}
                for p in self.requested
            ],
            columns=["provider", "loaded", "reason"],
        )

    def summary(self) -> str:
        text = f"runs on {', '.join(_short(p) for p in self.active)}"
        if self.missing:
            text += "; did not load: " + "; ".join(
                f"{_short(m.provider)} ({m.reason})" for m in self.missing
            )
        return text

    def __repr__(self) -> str:
        return f"<SessionReport {self.summary()}; created in {self.create_ms:.1f} ms>"
