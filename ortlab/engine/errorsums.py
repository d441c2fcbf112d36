"""Per-tensor error between two runs, folded as the values come (:class:`ErrorSums`), and a
model run with chosen intermediate tensors made outputs (:func:`with_outputs`): what the
quantization error and the first divergence both measure with (runs in the worker)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.errors import QuantizationError, error_text
from ortlab.core.onnx_util import seed_random_ops
from ortlab.core.run import Progress
from ortlab.engine.replies import TensorStats
from ortlab.engine.session import build_session, clean_ort_message

if TYPE_CHECKING:
    import onnxruntime as ort

Prepared: TypeAlias = "Mapping[str, np.ndarray | ort.OrtValue]"
"""Feeds as ``tasks.prepare_feeds`` makes them: arrays, and OrtValues for what numpy cannot
hold (bfloat16, float8)."""

__all__ = ["ACTIVATIONS_BYTES", "ErrorSums", "Side", "fold_groups", "with_outputs"]

CHUNK = 1 << 16
"""Elements folded at a time: three float64 chunks (1.5 MB) stay in a core's cache."""
ACTIVATIONS_BYTES = 256 << 20
"""The most the intermediate tensors of one pass may take, both sides together."""


class ErrorSums:
    """Running sums for cosine, SQNR and max/mean abs error of one tensor over samples."""

    def __init__(self) -> None:
        self.rr = self.tt = self.rt = self.noise = self.abs_sum = self.max_abs = 0.0
        self.count = 0
        self.shape_mismatch = self.nonfinite_ref = self.nonfinite_var = False

    def add(self, ref: np.ndarray, got: np.ndarray) -> None:
        """Fold one pair of values in: float64 sums over chunks of :data:`CHUNK` elements, so
        the float64 copies stay in the CPU's cache (whole-tensor copies made a 64 MB pair
        4 GB of memory traffic and ran at ~0.3 GB/s); a chunk's non-finite value shows as a
        non-finite square sum."""
        r_all, t_all = np.asarray(ref).ravel(), np.asarray(got).ravel()
        if r_all.shape != t_all.shape:
            self.shape_mismatch = True
            return
        n = int(r_all.size)
        size = min(n, CHUNK)
        r, t, d = (np.empty(size, np.float64) for _ in range(3))
        for start in range(0, n, CHUNK):
            k = min(CHUNK, n - start)
            rk, tk, dk = r[:k], t[:k], d[:k]
            rk[...] = r_all[start : start + k]
            tk[...] = t_all[start : start + k]
            np.subtract(rk, tk, out=dk)
            rr, tt = float(rk @ rk), float(tk @ tk)
            self.nonfinite_ref |= not math.isfinite(rr)
            self.nonfinite_var |= not math.isfinite(tt)
            self.rr += rr
            self.tt += tt
            self.rt += float(rk @ tk)
            self.noise += float(dk @ dk)
            np.abs(dk, out=dk)
            self.abs_sum += float(dk.sum())
            self.max_abs = max(self.max_abs, float(dk.max()))
        self.count += n

    def metrics(self) -> TensorStats:
        """The folded figures; NaN where they do not exist (shapes that differ, a non-finite
        value, the cosine of a zero tensor against a non-zero one). Tensors that were empty,
        or zero, on both sides are equal (cosine 1): the one home of that rule."""
        nan = float("nan")
        bad = self.shape_mismatch or self.nonfinite_ref or self.nonfinite_var or not self.count
        if not self.count and not (self.shape_mismatch or self.nonfinite_ref or self.nonfinite_var):
            return TensorStats(float("inf"), 1.0, 0.0, 0.0, False, False)  # empty alike: equal
        denom = (self.rr * self.tt) ** 0.5
        if bad:
            sqnr = cosine = nan
        elif not denom:  # a zero tensor: alike only when both are (no noise between them)
            sqnr = float("inf") if self.noise == 0 else nan
            cosine = 1.0 if self.noise == 0 else nan
        else:
            cosine = self.rt / denom
            sqnr = float("inf") if self.noise == 0 else 10 * np.log10(self.rr / self.noise)
        return TensorStats(
            sqnr_db=float(sqnr),
            cosine=float(cosine),
            max_abs=nan if bad else self.max_abs,
            mean_abs=nan if bad else self.abs_sum / self.count,
            shape_mismatch=self.shape_mismatch,
            nonfinite=self.nonfinite_ref or self.nonfinite_var,
        )


def with_outputs(
    model_path: str, tensors: list[str], what: str, config: SessionConfig | None = None
) -> Callable[[Prepared], dict[str, np.ndarray]]:
    """A runner of the model that also returns ``tensors``; returns {name: array} for those
    tensors only. Without ``config``: optimizations off on the CPU, so no fusion swallows a
    tensor; with one, that session (its EPs and level: what ORT keeps of the exposed tensors
    is then its own)."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    model = onnx.load(model_path)
    seed_random_ops(model.graph)  # random ops draw alike in both models, on every pass
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(
        helper.make_empty_tensor_value_info(t) for t in tensors if t not in have
    )
    with cache.temp_dir("intermediates-") as folder:
        path = folder / "model.onnx"
        onnx.save_model(model, str(path))
        del model
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            if config is None:
                sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            else:
                sess, _ = build_session(str(path), config, log_severity=3)
        except Exception as err:
            raise QuantizationError(
                f"onnxruntime cannot open {what} with {len(tensors)} intermediate tensors "
                f"made outputs (needed to read them): {clean_ort_message(error_text(err))}. The "
                "variant's final outputs can still be compared: ortlab.compare(model, "
                "[variant])."
            ) from err
    names = [o.name for o in sess.get_outputs()]
    wanted = set(tensors)

    def run(feeds: Prepared) -> dict[str, np.ndarray]:
        values = sess.run([n for n in names if n in wanted], feeds)
        return dict(zip([n for n in names if n in wanted], values, strict=True))

    return run


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a model file, the session config it runs under (None:
    optimizations off on the CPU, so no fusion swallows a tensor) and its name in errors."""

    path: str
    config: SessionConfig | None
    what: str


def fold_groups(
    progress: Progress,
    reference: Side,
    other: Side,
    pairs: dict[str, str],
    samples: Sequence[Prepared],
    *,
    chunk: int,
    most: int,
) -> tuple[dict[str, TensorStats], int]:
    """The other side's error against each reference tensor (``pairs``: reference tensor ->
    the other side's), over ``samples`` (prepared feeds), and the session runs it took.

    Memory stays bounded: each pass runs both sides with a group of extra outputs on one
    sample, folds them into running sums and drops them (a 1.5k-node detector once grew by
    1.5 GB per sample when every activation of every sample was kept). The first group has
    ``chunk`` tensors; each next one (at most ``most``) is sized from the bytes per tensor
    seen so far, so a pass holds about :data:`ACTIVATIONS_BYTES` of activations whatever the
    model's resolution."""
    names = list(pairs)
    sums: dict[str, ErrorSums] = {}
    done, seen_bytes, seen, runs = 0, 0, 0, 0
    while done < len(names):
        group = names[done : done + chunk]
        got = with_outputs(other.path, sorted({pairs[t] for t in group}), other.what, other.config)
        ref = with_outputs(reference.path, group, reference.what, reference.config)
        for feeds in samples:
            a, b = ref(feeds), got(feeds)
            runs += 2
            for t in group:
                x, y = a.get(t), b.get(pairs[t])
                if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
                    sums.setdefault(t, ErrorSums()).add(x, y)
                    seen_bytes += x.nbytes + y.nbytes
                    seen += 1
            del a, b
        del ref, got
        done += len(group)
        progress(done, len(names))
        per_tensor = seen_bytes / max(seen, 1)
        chunk = int(min(max(ACTIVATIONS_BYTES // max(per_tensor, 1.0), 4), most))
    return {t: s.metrics() for t, s in sums.items()}, runs
