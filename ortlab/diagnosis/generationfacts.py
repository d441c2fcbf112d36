"""What the doctor's generation stage measured, as data: each candidate's trial against the
baseline (:class:`GenerationTrial`: paired decode and first-token ratios, the tokens kept, a
variant's KL divergence) and the stage's facts (:class:`GenerationFacts`: the profiled
baseline generation and the trials). :mod:`ortlab.diagnosis.generation` measures them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ortlab.analysis.generation.generate import GenerationResult
from ortlab.analysis.generation.quality import KLDRow
from ortlab.core.config import SessionConfig
from ortlab.core.result import Table
from ortlab.core.stats import PAIRED_COLUMNS, Paired, spread
from ortlab.core.units import tokens_per_s

__all__ = ["TRIAL_COLUMNS", "GenerationFacts", "GenerationTrial", "median"]


def median(values: list[float]) -> float:
    """The median of ``values`` (NaN when there are none)."""
    return float(np.median(values)) if values else math.nan


TRIAL_COLUMNS = (
    "key",
    "label",
    "decode_tokens_per_s",
    *(f"decode_{c}" for c in PAIRED_COLUMNS),
    "ttft_ms",
    *(f"ttft_{c}" for c in PAIRED_COLUMNS),
    "tokens_kept",
    "tokens",
    "kld_mean",
    "kld_p99",
    "top1",
)
"""The trial table's columns: each paired ratio spread as every table spreads one
(:func:`~ortlab.core.stats.spread`), prefixed by what it times."""


@dataclass(frozen=True)
class GenerationTrial:
    """One candidate generating against the baseline, interleaved."""

    key: str
    label: str
    variant: str
    config: SessionConfig
    shared_buffer: int
    """Tokens of the one buffer per past/present pair (0: present copied to past each step)."""
    decode: Paired
    """Time per decode token, candidate / baseline, per round, with its interval."""
    ttft: Paired
    """Time to first token (the prefill), candidate / baseline."""
    tokens_kept: int
    """Of the baseline's greedy tokens, how many the candidate generates too, from the first."""
    tokens: int
    code: str
    decode_rounds: list[float] = field(default_factory=list)
    """The candidate's time per decode token in each round, ms."""
    ttft_rounds: list[float] = field(default_factory=list)
    """The candidate's time to first token in each round, ms."""
    base_decode_rounds: list[float] = field(default_factory=list)
    """The baseline's time per decode token in each round of this pair, ms."""
    base_ttft_rounds: list[float] = field(default_factory=list)
    """The baseline's time to first token in each round of this pair, ms."""
    quality: KLDRow | None = None
    """A variant's next-token divergence from the baseline model (KL per position, top-1
    agreement over a teacher-forced stream); None for settings of the same model, or where it
    could not be measured (the variant is then not proposed)."""

    @property
    def decode_ms(self) -> float:
        """The candidate's time per decode token: the median over rounds."""
        return median(self.decode_rounds)

    @property
    def base_decode_ms(self) -> float:
        return median(self.base_decode_rounds)

    @property
    def ttft_ms(self) -> float:
        return median(self.ttft_rounds)

    @property
    def base_ttft_ms(self) -> float:
        return median(self.base_ttft_rounds)

    @property
    def decode_tokens_per_s(self) -> float:
        """The candidate's decode tokens/s (one sequence: the doctor generates batch 1)."""
        return tokens_per_s(1, self.decode_ms)

    @property
    def base_decode_tokens_per_s(self) -> float:
        return tokens_per_s(1, self.base_decode_ms)


@dataclass(frozen=True)
class GenerationFacts:
    """The stage's measurements: the profiled baseline generation (its phases, layers and the
    roofline per phase) and each candidate's trial."""

    prompt: int
    new_tokens: int
    rounds: int
    baseline: GenerationResult
    trials: list[GenerationTrial] = field(default_factory=list)
    other_cores: float | None = None
    base_ttft_ms: float = math.nan
    """The baseline's time to first token: the median over every round it ran in the trials
    (else over the profiled-off runs of :attr:`baseline`)."""
    base_decode_ms: float = math.nan
    """The baseline's time per decode token, measured as :attr:`base_ttft_ms`."""
    measured: str = ""
    """Where the two come from, in words."""

    def table(self) -> Table:
        """One row per trial (:data:`TRIAL_COLUMNS`): key, label, decode_tokens_per_s, the
        decode ratio spread (decode_ratio, decode_ratio_low, decode_ratio_high, decode_confidence,
        decode_verdict), ttft_ms and its ratio spread the same way, tokens_kept of tokens,
        and a variant's KL divergence."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "key": t.key,
                    "label": t.label,
                    "decode_tokens_per_s": t.decode_tokens_per_s,
                    **spread(t.decode, "decode_"),
                    "ttft_ms": t.ttft_ms,
                    **spread(t.ttft, "ttft_"),
                    "tokens_kept": t.tokens_kept,
                    "tokens": t.tokens,
                    "kld_mean": t.quality.mean if t.quality else math.nan,
                    "kld_p99": t.quality.p99 if t.quality else math.nan,
                    "top1": t.quality.top1 if t.quality else math.nan,
                }
                for t in self.trials
            ],
            columns=list(TRIAL_COLUMNS),
        )
