"""The cache stays within its bound, and a long session leaks nothing: 500 configuration
changes and runs in one engine session keep the kernel's memory flat and leave no worker
processes, temporary or profile files behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

import ortlab
from ortlab.core import cache
from ortlab.core.errors import CacheError


def _entry(folder: Path, name: str, size: int, age_s: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"x" * size)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_prune_evicts_least_recently_used_and_keeps_recent_and_tmp() -> None:
    root = cache.cache_dir()
    old = _entry(root / "variants", "old.onnx", 4000, 3 * 86400)
    older = _entry(root / "optimized" / "m-1", "all.onnx", 4000, 5 * 86400)
    recent = _entry(root / "models", "recent.onnx", 4000, 60)
    flight = _entry(root / "tmp", "profile.json", 4000, 9 * 86400)
    evictable = sum(size for _, size, _ in cache._entries(root))  # tmp/ is not counted
    freed = cache.prune(limit=evictable - 4000)
    assert freed == 4000 and not older.exists() and not (root / "optimized" / "m-1").exists()
    assert old.exists() and recent.exists() and flight.exists()
    cache.prune(limit=0)
    assert not old.exists() and recent.exists() and flight.exists()  # used in the last hour
    flight.unlink()


def test_the_bound_is_applied_when_the_cache_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry(cache.cache_dir() / "variants", "stale.onnx", 10_000, 86400)
    monkeypatch.setenv("ORTLAB_CACHE_MAX_BYTES", "5000")
    monkeypatch.setattr(cache, "_last_prune", -cache.PRUNE_EVERY_S)  # due now
    cache.subdir("variants")
    assert not (cache.cache_dir() / "variants" / "stale.onnx").exists()
    monkeypatch.setenv("ORTLAB_CACHE_MAX_BYTES", "5GB")
    with pytest.raises(CacheError, match="not a number of bytes"):
        cache.max_bytes()


def test_cli_cache_info_names_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    from ortlab.cli import main

    assert main(["cache", "info"]) == 0
    assert "ORTLAB_CACHE_MAX_BYTES" in capsys.readouterr().out


def _leftovers() -> list[Path]:
    tmp = cache.cache_dir() / "tmp"
    return [p for p in tmp.rglob("*") if not p.name.startswith("worker-")]


@pytest.mark.slow
def test_500_config_changes_leak_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    m = ortlab.load(ortlab.examples.mlp())
    me = psutil.Process()
    configs = [
        ortlab.SessionConfig(level=lv, intra_op_threads=t, io_binding=io)
        for lv in ("disabled", "basic", "all")
        for t in (0, 1)
        for io in (False, True)
    ]

    def churn(n: int, start: int) -> None:
        for i in range(start, start + n):
            cfg = configs[i % len(configs)]
            if i % 25 == 0:
                ortlab.profile(m, cfg, runs=2, warmup=0, progress=False)
            else:
                ortlab.benchmark(m, cfg, runs=2, warmup=0, progress=False)

    before = set(_leftovers())  # another test's in this process are not these runs'
    churn(50, 0)  # warm up: imports, the worker, its session cache
    rss, children = me.memory_info().rss, len(me.children(recursive=True))
    churn(500, 50)
    grown = (me.memory_info().rss - rss) / 1e6
    assert grown < 25, f"kernel memory grew {grown:.1f} MB over 500 runs"
    assert len(me.children(recursive=True)) == children
    assert sorted(set(_leftovers()) - before) == []
    assert list(tmp_path.iterdir()) == []  # no profile or temp file in the working directory
