"""Output error between a float model and a variant: cosine, SQNR, max/mean absolute error,
top-k agreement for class scores — and the degenerate cases named, never scored as perfect."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Scored",
    "degenerate_notes",
    "error_metrics",
    "lowest_cosine",
    "output_errors",
    "scorable",
    "sqnr_db",
    "unscorable",
]


@dataclass(frozen=True)
class Scored:
    """How one output is scored: ``float`` values (cosine, SQNR, abs error), ``labels``
    compared exactly (integer, bool and string tensors: class ids, masks), or ``left out``
    with the reason. ``note`` says when the value was reshaped to be scored (ZipMap)."""

    kind: str
    values: np.ndarray
    """The values scored (empty when left out)."""
    note: str = ""


def scorable(value: object) -> Scored:
    """One output value as ORT returned it, in the form it is scored in.

    A ZipMap output (a sequence of ``{class: probability}`` maps, one per row) is scored as
    the ``[rows, classes]`` matrix of its probabilities in class order, which holds the same
    numbers; other sequences and maps are left out, and the result says so."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = sorted(value[0], key=str)
        if all(sorted(v, key=str) == keys for v in value):
            dense = np.asarray([[v[k] for k in keys] for v in value], dtype=np.float64)
            how = (
                f"a sequence of maps (ZipMap), scored as [rows, {len(keys)} classes] in class order"
            )
            return Scored("float", dense, how)
    if isinstance(value, list | dict | tuple):
        kind = "a map" if isinstance(value, dict) else "a sequence"
        return Scored("left out", np.empty(0), f"{kind}, not a tensor: not scored")
    arr = np.asarray(value)
    if arr.dtype.kind in "fc":
        return Scored("float", arr)
    return Scored("labels", arr, f"{arr.dtype.name} values, compared exactly")


def output_errors(
    refs: Sequence[Mapping[str, object]], tests: Sequence[Mapping[str, object]]
) -> tuple[dict[str, dict[str, float | str]], list[str]]:
    """Every output's error between reference and variant runs of the same samples, and notes
    for the outputs that were reshaped or left out.

    Float outputs get :func:`error_metrics`; label outputs (integer, bool, string) get
    ``labels_equal``, the fraction of values that are exactly equal, and no cosine; an output
    whose form differs between the two (a variant returning another type) is named."""
    errors: dict[str, dict[str, float | str]] = {}
    notes: list[str] = []
    for name in refs[0] if refs else {}:
        a = [scorable(r[name]) for r in refs]
        b = [scorable(t[name]) for t in tests]
        kinds = {s.kind for s in a} | {s.kind for s in b}
        if "left out" in kinds or len(kinds) > 1:
            why = next((s.note for s in a + b if s.kind == "left out"), "")
            notes.append(
                f"output {name!r} left out of the scores: "
                f"{why or 'its type differs between the two models'}"
            )
            continue
        if a[0].note:
            notes.append(f"output {name!r}: {a[0].note}")
        ra, tb = [s.values for s in a], [s.values for s in b]
        if a[0].kind == "labels":
            same = [np.asarray(x).shape == np.asarray(y).shape for x, y in zip(ra, tb, strict=True)]
            equal = sum(
                int(np.sum(np.asarray(x) == np.asarray(y))) if ok else 0
                for x, y, ok in zip(ra, tb, same, strict=True)
            )
            total = sum(max(int(np.size(x)), 1) for x in ra)
            errors[name] = {"kind": "labels", "labels_equal": equal / max(total, 1)}
        else:
            errors[name] = {"kind": "float", **error_metrics(ra, tb)}
            why = str(errors[name].get("degenerate", ""))
            if why.startswith(SHAPES_DIFFER):
                notes.append(f"output {name!r} not scored: {why}")
    return errors, notes


SHAPES_DIFFER = "its shape differs"
"""How ``degenerate`` begins for an output whose shape differs between the two models."""


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    r = np.asarray(ref, dtype=np.float64).ravel()
    t = np.asarray(test, dtype=np.float64).ravel()
    noise = float(np.sum((r - t) ** 2))
    signal = float(np.sum(r**2))
    if noise == 0:
        return float("inf")
    return 10 * np.log10(signal / noise) if signal > 0 else float("-inf")


def error_metrics(
    refs: Sequence[np.ndarray], tests: Sequence[np.ndarray]
) -> dict[str, float | str]:
    """max/mean abs error, cosine similarity and SQNR over all samples; top-1 agreement for
    class scores (every sample's output is ``[batch, classes >= 2]``), top-5 only with 10
    classes or more (with fewer, 5 of them are most of the classes).

    Degenerate cases are named, never scored as perfect: ``degenerate`` says why cosine/SQNR
    are NaN (the float output holds NaN/Inf or is all zeros, the variant's holds NaN/Inf, or
    the two differ in shape on some sample)."""
    out: dict[str, float | str] = {
        "max_abs": float("nan"),
        "mean_abs": float("nan"),
        "cosine": float("nan"),
        "sqnr_db": float("nan"),
    }
    apart = [
        (np.shape(x), np.shape(y))
        for x, y in zip(refs, tests, strict=True)
        if np.shape(x) != np.shape(y)
    ]
    if apart:  # a length the model computes (speech frames, detections): no value-by-value score
        a, b = apart[0]
        out["degenerate"] = (
            f"{SHAPES_DIFFER} between the two models on {len(apart)} of {len(refs)} samples "
            f"({list(a)} vs {list(b)}): the model computes it from values (a duration, a "
            "count), so the values cannot be compared one by one"
        )
        return out
    r = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in refs])
    t = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in tests])
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
        if rs.shape[1] >= 10:
            out["top5_agreement"] = float(
                np.mean(
                    [len(set(a[:5]) & set(b[:5])) / 5 for a, b in zip(top_r, top_t, strict=True)]
                )
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
    """Outputs shaped like class scores: rank 2, ``[batch, classes]`` with >= 2 classes."""
    return all(np.ndim(x) == 2 and np.shape(x)[1] >= 2 for x in refs)


def lowest_cosine(
    base: Sequence[Mapping[str, object]], other: Sequence[Mapping[str, object]]
) -> float:
    """The lowest output cosine of ``other`` against ``base`` (outputs per sample).
    Degenerate outputs never pass for accurate: a variant that gives NaN/Inf scores 0; when
    the baseline's output is itself NaN or all zeros, only identical outputs score 1."""

    errors, _ = output_errors(base, other)
    worst = 1.0
    for name, e in errors.items():
        if e["kind"] == "labels":
            worst = min(worst, 1.0 if e["labels_equal"] == 1.0 else 0.0)
            continue
        cos = float(e["cosine"])
        if math.isnan(cos):
            same = all(
                np.array_equal(scorable(a[name]).values, scorable(b[name]).values, equal_nan=True)
                for a, b in zip(base, other, strict=True)
            )
            cos = 1.0 if same else 0.0
        worst = min(worst, cos)
    return worst


def degenerate_notes(outputs: list[dict[str, np.ndarray]]) -> list[str]:
    """The float model's own outputs on the samples: NaN/Inf or all zeros make every
    accuracy figure against them meaningless, so say it."""
    out = []
    for name in outputs[0] if outputs else {}:
        forms = [scorable(o[name]) for o in outputs]
        if any(f.kind != "float" for f in forms):
            continue
        why = unscorable(np.concatenate([np.ravel(f.values) for f in forms]))
        if why:
            out.append(
                f"the model's own output {name!r} {why} on the samples: variant "
                "accuracy against it cannot be scored"
            )
    return out
