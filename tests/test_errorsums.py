"""The per-tensor error fold (engine.errorsums.ErrorSums), which diverge and the quantization
error share: folded in cache-sized chunks, it equals the whole-tensor float64 formulas at every
size around the chunk's edges, flags a non-finite value wherever it sits, and sums over samples
as over one concatenated tensor."""

from __future__ import annotations

import numpy as np
import pytest

from ortlab.engine.errorsums import CHUNK, ErrorSums


def _plain(r: np.ndarray, t: np.ndarray) -> tuple[float, float, float, float]:
    r, t = r.astype(np.float64).ravel(), t.astype(np.float64).ravel()
    d = r - t
    cosine = float(r @ t) / float(np.sqrt((r @ r) * (t @ t)))
    return cosine, float(np.abs(d).max()), float(np.abs(d).mean()), 10 * np.log10((r @ r) / (d @ d))


@pytest.mark.parametrize("n", [1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
def test_the_fold_equals_the_whole_tensor_formulas(n: int) -> None:
    rng = np.random.default_rng(n)
    r = rng.standard_normal(n).astype(np.float32)
    t = (r + rng.standard_normal(n).astype(np.float32) * 1e-3).reshape(-1, 1)
    s = ErrorSums()
    s.add(r, t)
    m = s.metrics()
    cosine, worst, mean, sqnr = _plain(r, t)
    assert m.cosine == pytest.approx(cosine, abs=1e-12)
    assert (m.max_abs, m.mean_abs) == (pytest.approx(worst), pytest.approx(mean))
    assert m.sqnr_db == pytest.approx(sqnr, rel=1e-9)


def test_samples_fold_as_one_tensor_and_a_late_nan_is_seen() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, CHUNK + 3)).astype(np.float32)
    s = ErrorSums()
    s.add(a, b)
    s.add(b, a)
    whole = _plain(np.concatenate([a, b]), np.concatenate([b, a]))
    assert s.metrics().cosine == pytest.approx(whole[0], abs=1e-12)
    bad = b.copy()
    bad[-1] = np.nan  # in the last chunk
    s = ErrorSums()
    s.add(a, bad)
    m = s.metrics()
    assert m.nonfinite and np.isnan(m.cosine) and not m.shape_mismatch
    s = ErrorSums()
    s.add(a, b[:-1])
    assert s.metrics().shape_mismatch


def test_zero_tensors_alike_are_equal_and_against_non_zero_have_no_cosine() -> None:
    """The one home of the rule: two zero (or empty) tensors agree (cosine 1, SQNR infinite,
    nothing apart); a zero tensor against a non-zero one has no cosine, and its error shows."""
    zeros = np.zeros((3, 5), np.float32)
    same = ErrorSums()
    same.add(zeros, zeros.copy())
    m = same.metrics()
    assert (m.cosine, m.sqnr_db, m.max_abs) == (1.0, float("inf"), 0.0)
    other = ErrorSums()
    other.add(zeros, np.full_like(zeros, 0.5))
    o = other.metrics()
    assert np.isnan(o.cosine) and o.max_abs == 0.5 and np.isnan(o.sqnr_db)
    empty = ErrorSums()
    empty.add(np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32))
    assert empty.metrics().cosine == 1.0
