"""The worker task behind ``ortlab.generate``: a greedy generation loop in plain onnxruntime
(present -> past each step), timed per step, run several times on one session."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ortlab.core.decoder import DecoderInfo
from ortlab.core.errors import RunError
from ortlab.core.machine import cpu_sample, other_cores
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.replies import GenerateReply
from ortlab.engine.tasks import _rss, _run_error, _session

__all__ = ["generate", "step_feeds"]


def step_feeds(
    info: DecoderInfo,
    ids: np.ndarray,
    past: dict[str, np.ndarray],
    past_length: int,
    dtypes: dict[str, np.dtype[Any]],
) -> dict[str, np.ndarray]:
    """One step's feeds: ``ids`` ([batch, new]) after ``past_length`` cached tokens held in
    ``past`` (name -> [batch, kv heads, past, head size]); the mask, positions and an optimum
    merged decoder's branch follow from them."""
    batch, new = ids.shape
    feeds: dict[str, np.ndarray] = {info.input_ids: ids.astype(dtypes[info.input_ids])}
    if info.mask:
        feeds[info.mask] = np.ones((batch, past_length + new), dtype=dtypes[info.mask])
    if info.positions:
        pos = np.arange(past_length, past_length + new, dtype=dtypes[info.positions])
        feeds[info.positions] = np.broadcast_to(pos, (batch, new)).copy()
    if info.use_cache_branch:
        feeds[info.use_cache_branch] = np.array([past_length > 0], dtype=bool)
    feeds.update(past)
    return feeds


def generate(
    progress: Progress,
    job: ModelJob,
    *,
    decoder: DecoderInfo,
    new_tokens: int,
    runs: int,
) -> GenerateReply:
    """``runs`` greedy generations of ``new_tokens`` tokens after the prompt in ``job.feeds``
    (its ``input_ids``): the first step is the prefill (empty cache), each next step feeds the
    argmax token with the previous step's present outputs as its past. Times each step's
    ``sess.run`` (ns), the tokens, the present outputs' bytes after each step, and the
    process's resident memory before and after the first generation."""
    sess, report, _ = _session(job.model_path, job.model_name, job.config)
    dtypes = {i.name: _np(i.type) for i in sess.get_inputs()}
    out_names = [o.name for o in sess.get_outputs()]
    logits_at = out_names.index("logits") if "logits" in out_names else 0
    present_at = {p.past_key: out_names.index(p.present_key) for p in decoder.pairs} | {
        p.past_value: out_names.index(p.present_value) for p in decoder.pairs
    }
    prompt = np.asarray(job.feeds[decoder.input_ids])
    batch = prompt.shape[0]
    empty = {
        name: np.zeros((batch, decoder.kv_heads, 0, decoder.head_size), dtype=dtypes[name])
        for name in decoder.past_inputs
    }
    since = cpu_sample()
    clock = time.perf_counter_ns
    steps_ns: list[list[int]] = []
    tokens: list[list[int]] = []
    present_bytes: list[int] = []
    rss: list[int] = [_rss()]
    total = runs * new_tokens
    for r in range(runs):
        ids, past, length = prompt, dict(empty), 0
        times: list[int] = []
        made: list[int] = []
        for step in range(new_tokens):
            feeds = step_feeds(decoder, ids, past, length, dtypes)
            t0 = clock()
            try:
                outs = sess.run(None, feeds)
            except Exception as err:
                raise _run_error(err, job.model_name, job.config, feeds) from err
            times.append(clock() - t0)
            length += ids.shape[1]
            nxt = np.asarray(outs[logits_at])[:, -1, :].argmax(axis=-1)
            made.append(int(nxt[0]))
            past = {name: outs[k] for name, k in present_at.items()}
            if r == 0:
                present_bytes.append(sum(int(v.nbytes) for v in past.values()))
            ids = nxt.reshape(batch, 1)
            progress(r * new_tokens + step + 1, total)
        if r == 0:
            rss.append(_rss())
        steps_ns.append(times)
        tokens.append(made)
    if any(t != tokens[0] for t in tokens[1:]):
        raise RunError(
            f"Greedy generation of {job.model_name!r} gave different tokens from run to run: "
            "the model is not deterministic on these inputs."
        )
    load = other_cores(since, cpu_sample())
    return GenerateReply(
        steps_ns=steps_ns,
        tokens=tokens[0],
        present_bytes=present_bytes,
        rss_before=rss[0],
        rss_after=rss[-1],
        report=report,
        other_cores=None if np.isnan(load) else round(float(load), 2),
    )


def _np(onnx_type: str) -> np.dtype[Any]:
    """'tensor(int64)' -> int64, 'tensor(float16)' -> float16, 'tensor(bool)' -> bool."""
    name = onnx_type.removeprefix("tensor(").removesuffix(")")
    return np.dtype({"float": "float32", "double": "float64"}.get(name, name))
