"""Per-tensor error between two runs, folded as the values come (:class:`ErrorSums`), and a
model run with chosen intermediate tensors made outputs (:func:`with_outputs`): what the
quantization error and the first divergence both measure with (runs in the worker)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ortlab.core import cache
from ortlab.core.config import SessionConfig
from ortlab.core.errors import QuantizationError, error_text
from ortlab.core.onnx_util import seed_random_ops
from ortlab.engine.replies import TensorStats
from ortlab.engine.session import build_session, clean_ort_message

__all__ = ["ErrorSums", "with_outputs"]


class ErrorSums:
    """Running sums for cosine, SQNR and max/mean abs error of one tensor over samples."""

    def __init__(self) -> None:
        self.rr = self.tt = self.rt = self.noise = self.abs_sum = self.max_abs = 0.0
        self.count = 0
        self.shape_mismatch = self.nonfinite_ref = self.nonfinite_var = False

    def add(self, ref: np.ndarray, got: np.ndarray) -> None:
        r = np.asarray(ref, dtype=np.float64).ravel()
        t = np.asarray(got, dtype=np.float64).ravel()
        if r.shape != t.shape:
            self.shape_mismatch = True
            return
        self.nonfinite_ref |= not bool(np.isfinite(r).all())
        self.nonfinite_var |= not bool(np.isfinite(t).all())
        d = r - t
        self.rr += float(r @ r)
        self.tt += float(t @ t)
        self.rt += float(r @ t)
        self.noise += float(d @ d)
        self.abs_sum += float(np.abs(d).sum())
        self.max_abs = max(self.max_abs, float(np.abs(d).max()) if d.size else 0.0)
        self.count += int(r.size)

    def metrics(self) -> TensorStats:
        nan = float("nan")
        bad = self.shape_mismatch or self.nonfinite_ref or self.nonfinite_var or not self.count
        denom = (self.rr * self.tt) ** 0.5
        if bad or not denom:
            sqnr = cosine = nan
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
) -> Callable[[dict[str, Any]], Any]:
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

    def run(feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        values = sess.run([n for n in names if n in wanted], feeds)
        return dict(zip([n for n in names if n in wanted], values, strict=True))

    return run
