"""A session with ORT's profiler on, its trace parsed when the block ends: the profiled
generations of ``ortlab.generate`` and the profiled cells of ``ortlab.llm_bench``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ortlab.core import cache
from ortlab.core.machine import cpu_sample
from ortlab.core.run import ModelJob
from ortlab.engine.trace import ProfileData

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["profiled_session"]


@contextlib.contextmanager
def profiled_session(
    job: ModelJob, prefix: str, *, skip_runs: int = 0
) -> Iterator[tuple[ort.InferenceSession, list[ProfileData]]]:
    """A session of ``job``'s model and config with ORT's profiler on, its trace in a
    temporary folder; when the block ends the trace is parsed (its first ``skip_runs`` runs
    dropped) with the machine's load meanwhile into the list yielded beside the session."""
    from ortlab.engine.session import build_session
    from ortlab.engine.tasks import with_load
    from ortlab.engine.trace import parse_profile_file

    with cache.temp_dir(prefix) as folder:
        since = cpu_sample()
        sess, _ = build_session(
            job.model_path,
            job.config,
            model_name=job.model_name,
            profile_prefix=str(folder / "ortlab"),
        )
        trace: list[ProfileData] = []
        try:
            yield sess, trace
        finally:
            path = sess.end_profiling()
        trace.append(with_load(parse_profile_file(path, skip_runs=skip_runs), since))
