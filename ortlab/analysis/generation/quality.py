"""``ortlab.kl_divergence``: how far a decoder's variant (int4, fp16, an edited copy) moves
its next-token distributions, measured as the community measures it — llama.cpp's
``llama-perplexity --kl-divergence``: over a teacher-forced token stream, KL(reference ||
variant) per position (mean, median, 99th percentile, max; nats) and top-1 agreement — beside
the greedy tokens a variant keeps, which say little about how close the rest is."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ortlab.analysis.generation.generate import require_decoder
from ortlab.core.config import SessionConfig
from ortlab.core.errors import FeedError
from ortlab.core.model import Model, ModelLike, load
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.engine import tasks_kld
from ortlab.engine.calls import as_config, edge, run_model_task

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.decoder import DecoderInfo

__all__ = ["KLDResult", "KLDRow", "kl_divergence", "kl_divergence_run"]

WINDOW = 128
"""Tokens per window: each is read in one prefill from an empty cache."""


@dataclass(frozen=True)
class KLDRow:
    """One variant against the reference."""

    variant: str
    kl: list[float]
    """KL(reference || variant) of the next-token distributions at each position, nats."""
    agree: list[bool]
    """Whether the two put the same token first, at each position."""

    @property
    def mean(self) -> float:
        return float(np.mean(self.kl)) if self.kl else float("nan")

    @property
    def median(self) -> float:
        return float(np.median(self.kl)) if self.kl else float("nan")

    @property
    def p99(self) -> float:
        return float(np.percentile(self.kl, 99)) if self.kl else float("nan")

    @property
    def max(self) -> float:
        return float(np.max(self.kl)) if self.kl else float("nan")

    @property
    def top1(self) -> float:
        """The share of positions where both put the same token first."""
        return float(np.mean(self.agree)) if self.agree else float("nan")

    def sentence(self) -> str:
        """'KLD mean 0.0123, p99 0.0871 nats; top-1 agreement 97.3 % over 256 positions'."""
        return (
            f"KLD against the reference: mean {self.mean:.4f}, p99 {self.p99:.4f} nats; "
            f"top-1 agreement {self.top1:.1%} over {len(self.kl)} teacher-forced positions"
        )


@dataclass(frozen=True)
class KLDResult(Result):
    """Each variant's next-token divergence from the reference model (:attr:`table`).

    ``plot()``: each variant's KL per position, sorted (its distribution)."""

    model: str
    config: SessionConfig
    rows: list[KLDRow]
    positions: int
    window: int
    synthetic: bool
    failed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @table
    def table(self) -> Table:
        """One row per variant: variant, kld_mean, kld_median, kld_p99, kld_max (nats),
        top1 (agreement share), positions."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "variant": r.variant,
                    "kld_mean": r.mean,
                    "kld_median": r.median,
                    "kld_p99": r.p99,
                    "kld_max": r.max,
                    "top1": r.top1,
                    "positions": len(r.kl),
                }
                for r in self.rows
            ]
        )

    def to_pandas(self) -> Table:
        """The :attr:`table`."""
        return self.table

    def __repr__(self) -> str:
        return f"<KLDResult {self.model!r}: {len(self.rows)} variants, {self.positions} positions>"


def kl_divergence(
    model: ModelLike,
    variants: ModelLike | Sequence[ModelLike],
    config: ConfigLike | None = None,
    *,
    tokens: Sequence[int] | np.ndarray | None = None,
    length: int = 256,
    window: int = WINDOW,
    progress: bool | Callable[[int, int], None] = True,
    timeout: float | None = None,
) -> KLDResult:
    """Each variant's next-token distributions against ``model``'s (the reference) over a
    teacher-forced stream of ``tokens`` (a real text's ids; None: ``length`` random ids in
    the vocabulary, synthetic and seeded), read in windows of ``window`` tokens, each from an
    empty cache: KL(reference || variant) per position and top-1 agreement. Both run with
    ``config``."""
    m = load(model)
    _require(m)
    many: list[ModelLike] = (
        list(variants) if isinstance(variants, list | tuple) else [variants]  # type: ignore[list-item]
    )
    run = edge(
        m,
        as_config(config),
        None,
        dims={"prompt": 1, "past": 0, "batch": 1},
        progress=progress,
        timeout=timeout,
    )
    return kl_divergence_run(
        run, [load(v) for v in many], tokens=tokens, length=length, window=window
    )


def _require(m: Model) -> DecoderInfo:
    return require_decoder(
        m,
        "ortlab.kl_divergence",
        "ortlab.compare and ortlab.quantization_error compare any outputs.",
    )


def kl_divergence_run(
    run: Run,
    loaded: Sequence[Model],
    *,
    tokens: Sequence[int] | np.ndarray | None = None,
    length: int = 256,
    window: int = WINDOW,
) -> KLDResult:
    """:func:`kl_divergence`'s body for a :class:`Run` of the reference decoder resolved
    already (at one token, no past: its inputs are only the session's warm-up); ``loaded``:
    the variants, each run with ``run``'s config."""
    m, cfg = run.model, run.config
    info = _require(m)
    for v in loaded:
        if v.decoder is None or v.decoder.vocab != info.vocab:
            raise FeedError(
                f"{v.name!r} is not a decoder over {m.name!r}'s vocabulary ({info.vocab}): "
                "a variant must read the same token ids."
            )
    synthetic = tokens is None
    ids = (
        np.random.default_rng(0).integers(0, int(info.vocab or 2), size=length)
        if tokens is None
        else np.asarray(tokens, dtype=np.int64).ravel()
    )
    limit = info.max_length or len(ids)
    step = max(1, min(window, limit))
    windows = [ids[k : k + step].tolist() for k in range(0, len(ids), step)]
    windows = [w for w in windows if len(w) > 1]
    if not windows:
        raise FeedError("kl_divergence needs a stream of two tokens or more.")
    reply = run_model_task(
        tasks_kld.divergence,
        run,
        decoder=info,
        variants=[(str(v.path), v.name, cfg) for v in loaded],
        windows=windows,
    )
    rows = [
        KLDRow(v.name, d.kl, d.agree)
        for v, d in zip(loaded, reply.variants, strict=True)
        if d is not None
    ]
    failed = {loaded[k].name: why for k, why in reply.failed.items()}
    notes = [
        f"Next-token distributions at each of {reply.positions} positions of a teacher-forced "
        f"stream, read in windows of {step} tokens from an empty cache (a prefill gives every "
        "position's logits); KL(reference || variant) in nats, as llama-perplexity "
        "--kl-divergence reports it.",
        "The stream is "
        + ("random ids in the vocabulary (synthetic, seeded): " if synthetic else "the ids given")
        + ("a real text's ids say more about a variant's answers." if synthetic else "."),
    ]
    return KLDResult(
        model=m.name,
        config=cfg,
        rows=rows,
        positions=reply.positions,
        window=step,
        synthetic=synthetic,
        failed=failed,
        notes=notes,
    )
