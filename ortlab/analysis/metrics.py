"""Output error between a float model and a variant: cosine, SQNR, max/mean absolute error,
top-k agreement for class scores — and the degenerate cases named, never scored as perfect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["error_metrics", "sqnr_db", "unscorable"]


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    r = np.asarray(ref, dtype=np.float64).ravel()
    t = np.asarray(test, dtype=np.float64).ravel()
    noise = float(np.sum((r - t) ** 2))
    signal = float(np.sum(r**2))
    if noise == 0:
        return float("inf")
    return 10 * np.log10(signal / noise) if signal > 0 else float("-inf")


def error_metrics(refs: Sequence[np.ndarray], tests: Sequence[np.ndarray]) -> dict[str, Any]:
    """max/mean abs error, cosine similarity and SQNR over all samples; top-1/top-5 agreement
    only for class scores (every sample's output is ``[batch, classes >= 10]``).

    Degenerate cases are named, never scored as perfect: ``degenerate`` says why cosine/SQNR
    are NaN (the float output holds NaN/Inf or is all zeros, or the variant's holds NaN/Inf)."""
    r = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in refs])
    t = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in tests])
    if r.shape != t.shape:
        raise ValueError(f"outputs differ in size: {r.size} vs {t.size} values")
    out: dict[str, Any] = {"max_abs": float("nan"), "mean_abs": float("nan"),
                           "cosine": float("nan"), "sqnr_db": float("nan")}  # fmt: skip
    why = _degenerate(r, t)
    if why:
        out["degenerate"] = why
    if not np.isfinite(r).all() or not np.isfinite(t).all():
        return out
    diff = np.abs(r - t)
    out["max_abs"] = float(diff.max()) if diff.size else 0.0
    out["mean_abs"] = float(diff.mean()) if diff.size else 0.0
    denom = float(np.linalg.norm(r) * np.linalg.norm(t))
    if denom:
        out["cosine"] = float(np.sum(r * t) / denom)
        out["sqnr_db"] = sqnr_db(r, t)
    if _class_scores(refs):
        rs = np.concatenate([np.asarray(x, dtype=np.float64) for x in refs])
        ts = np.concatenate([np.asarray(x, dtype=np.float64) for x in tests])
        top_r, top_t = np.argsort(-rs, axis=1), np.argsort(-ts, axis=1)
        out["top1_agreement"] = float(np.mean(top_r[:, 0] == top_t[:, 0]))
        out["top5_agreement"] = float(
            np.mean([len(set(a[:5]) & set(b[:5])) / 5 for a, b in zip(top_r, top_t, strict=True)])
        )
    return out


def unscorable(values: np.ndarray) -> str:
    """Why an output cannot be a reference for cosine/SQNR: ``holds NaN/Inf (n of m
    values)``, ``is all zeros``, or '' when it can."""
    if not np.isfinite(values).all():
        bad = int(np.size(values) - np.isfinite(values).sum())
        return f"holds NaN/Inf ({bad:,} of {values.size:,} values)"
    return "" if np.any(values) else "is all zeros"


def _degenerate(r: np.ndarray, t: np.ndarray) -> str:
    why = unscorable(r)
    if why.startswith("holds"):
        return f"the float model's output {why}"
    if not np.isfinite(t).all():
        bad = int(np.size(t) - np.isfinite(t).sum())
        return f"the variant's output holds NaN/Inf ({bad:,} of {t.size:,} values)"
    if why:
        same = not np.any(t)
        return "the float model's output is all zeros" + (
            " (the variant's too: identical)" if same else ""
        )
    return ""


def _class_scores(refs: Sequence[np.ndarray]) -> bool:
    """Outputs shaped like class scores: rank 2, ``[batch, classes]`` with >= 10 classes."""
    return all(np.ndim(x) == 2 and np.shape(x)[1] >= 10 for x in refs)
