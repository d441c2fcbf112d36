"""Every figure the README quotes comes from a recorded run (issue 48 item 6): the fast tier's
test count and duration and the table of durations sit between markers and equal what
benchmarks/readme_figures.py renders from benchmarks/results/ — a README edited by hand, or a
record re-run without rewriting the README, fails here. The fast tier's record also has to
hold the tests that exist now: a count that no longer matches collection is stale."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import readme_figures

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_figures_are_the_recorded_ones() -> None:
    text = (ROOT / "README.md").read_text()
    for name, body in readme_figures.rendered().items():
        assert readme_figures.marked(text, name) == body, (
            f"README's {name} differs from its record: run python -m benchmarks.readme_figures"
        )


def test_the_fast_tier_is_what_run_tests_runs() -> None:
    """The record's selection is run-tests' own: the fast tier and CI's first part."""
    script = (ROOT / "run-tests").read_text(encoding="utf-8")
    got = re.search(r'^unmarked="([^"]+)"$', script, flags=re.M)
    assert got and got.group(1) == readme_figures.FAST_SELECTION
    assert script.count('-m "$unmarked"') == 2


@pytest.mark.slow
def test_the_fast_tier_record_counts_todays_tests() -> None:
    """The recorded count is the fast tier's collection today, within a few tests (a test
    added since the record is fine; a record from another era is not)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-m",
            readme_figures.FAST_SELECTION,
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    got = re.search(r"(\d+)(?:/\d+)? tests? (?:selected|collected)", done.stdout)
    assert got, done.stdout[-500:]
    recorded = readme_figures.load_record("fast_tier")["tests"]
    assert abs(int(got.group(1)) - recorded) <= 25, (int(got.group(1)), recorded)
