"""The worker task behind ``ortlab.kl_divergence``: a decoder and its variants read the same
teacher-forced token stream, window by window (a prefill from an empty cache gives the logits
at every position), and each variant's next-token distributions are set against the
reference's, as llama.cpp's ``llama-perplexity --kl-divergence`` does: the KL divergence
KL(reference || variant) per position, in nats, and whether the two agree on the top token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import error_text
from ortlab.core.onnx_util import np_dtype
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.greedyloop import step_feeds
from ortlab.engine.replies import DivergenceReply, TokenDivergence
from ortlab.engine.sessioncache import open_session
from ortlab.engine.tasks import run_error

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["divergence"]


def divergence(
    progress: Progress,
    job: ModelJob,
    *,
    decoder: DecoderInfo,
    variants: list[tuple[str, str, SessionConfig]],
    windows: list[list[int]],
) -> DivergenceReply:
    """For each variant (model path, name, config): per position of every window, KL(the
    job's model || the variant) of the next-token distributions and whether their top tokens
    agree. Windows are read one at a time, each from an empty cache; a variant that cannot be
    built or run is a ``failed`` entry (its index), the others go on."""
    ref, report, _ = open_session(job.model_path, job.model_name, job.config)
    sessions: list[Any] = []
    failed: dict[int, str] = {}
    for k, (path, name, config) in enumerate(variants):
        try:
            sessions.append(open_session(path, name, config)[0])
        except Exception as err:  # noqa: BLE001 - one variant fails, not the comparison
            failed[k] = error_text(err)
            sessions.append(None)
    out = [TokenDivergence(kl=[], agree=[]) for _ in variants]
    for w, ids in enumerate(windows):
        window = np.asarray([ids], dtype=np.int64)
        p = _log_probs(ref, decoder, window, job)
        for k, sess in enumerate(sessions):
            if sess is None:
                continue
            try:
                q = _log_probs(sess, decoder, window, job)
            except Exception as err:  # noqa: BLE001 - as above
                failed[k] = error_text(err)
                sessions[k] = None
                continue
            kl = np.sum(np.exp(p) * (p - q), axis=-1)
            out[k].kl.extend(float(x) for x in np.maximum(kl, 0.0))
            out[k].agree.extend(bool(a) for a in p.argmax(-1) == q.argmax(-1))
        progress(w + 1, len(windows))
    return DivergenceReply(
        positions=sum(len(w) for w in windows),
        variants=[None if k in failed else d for k, d in enumerate(out)],
        report=report,
        failed=failed,
    )


def _log_probs(
    sess: ort.InferenceSession, decoder: DecoderInfo, ids: np.ndarray, job: ModelJob
) -> np.ndarray:
    """The next-token log-probabilities at every position of ``ids`` (one prefill from an
    empty cache), float64: [positions, vocabulary]."""
    dtypes = {i.name: np_dtype(i.type) for i in sess.get_inputs()}
    past = {  # empty caches, a windowed buffer at its slots, carried states at zero
        name: np.zeros(decoder.past_shape(name, 1, 0), dtype=dtypes[name])
        for name in decoder.carried_inputs
    }
    feeds = step_feeds(decoder, ids, past, 0, dtypes)
    names = [o.name for o in sess.get_outputs()]
    try:
        logits = sess.run(["logits" if "logits" in names else names[0]], feeds)[0]
    except Exception as err:
        raise run_error(err, job.model_name, job.config, feeds) from err
    z = np.asarray(logits[0], dtype=np.float64)
    z -= z.max(axis=-1, keepdims=True)
    out: np.ndarray = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return out
