"""The README's figures, written from recorded runs: the fast tier's test count and duration
(recorded here, by running it) and the table of durations (recorded by
``benchmarks.readme_durations``). Each figure sits between markers in README.md
(``<!-- fast-tier -->…<!-- /fast-tier -->``, ``<!-- durations -->…<!-- /durations -->``) and is
rendered from its record only; tests/test_readme_figures.py fails when the README and the
records disagree.

    python -m benchmarks.readme_figures --fast-tier   # run the fast tier, record it, rewrite
    python -m benchmarks.readme_figures               # rewrite the README from the records
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, record

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FAST_SELECTION = " and ".join(
    f"not {m}" for m in ("slow", "ui", "notebook", "corpus", "pypi", "alone", "openvino")
)
"""The fast tier's selection, as ./run-tests --fast runs it (in two processes, as it does):
run-tests' ``unmarked``, the tests with no marker."""

DURATION_ROWS: list[tuple[str, list[str]]] = [
    (
        "`ortlab.Lab(m)` to its first run (placement, profile, 30-run benchmark)",
        ["ortlab.Lab(m) to its first run (sync)"],
    ),
    (
        "`ortlab.placement(m)` · `ortlab.profile(m, runs=20)`",
        ["ortlab.placement(m)", "ortlab.profile(m, runs=20)"],
    ),
    ("`ortlab.roofline(m)` (the ceilings measured once per session)", ["ortlab.roofline(m)"]),
    ("`ortlab.benchmark(m, runs=200)`", ["ortlab.benchmark(m, runs=200)"]),
    (
        '`ortlab.compare_configs(m, [disabled, all])` · `ortlab.quantize(m, mode="static")`',
        ["ortlab.compare_configs(m, [disabled, all])", "ortlab.quantize(m, mode='static')"],
    ),
    (
        "`ortlab.optimization_diff(m)` (five levels saved, mapped and timed)",
        ["ortlab.optimization_diff(m)"],
    ),
    (
        "`ortlab.throughput(m, concurrency=[1, 2])`",
        ["ortlab.throughput(m, concurrency=[1, 2])"],
    ),
    (
        "`ortlab.compare(m, [static int8, dynamic int8, fp16])` (each built first)",
        ["ortlab.compare(m, [static int8, dynamic int8, fp16])"],
    ),
    (
        "`ortlab.doctor(m)` (its budget is 120 s; it stops early when nothing is left)",
        ["ortlab.doctor(m) (budget 120 s)"],
    ),
    (
        "`ortlab.generate(llm, prompt=32, new_tokens=16)` (6 runs, 3 profiled, the rooflines)",
        ["ortlab.generate(llm, prompt=32, new_tokens=16)"],
    ),
    (
        "`ortlab.llm_bench(llm, prompt=(64, 128), new_tokens=(32,), depth=(0, 256), "
        "repetitions=3)`",
        [
            "ortlab.llm_bench(llm, prompt=(64, 128), new_tokens=(32,), depth=(0, 256), "
            "repetitions=3)"
        ],
    ),
    (
        '`ortlab.kl_divergence(fp32, ortlab.quantize(fp32, mode="int4"))` (the variant built '
        "first)",
        ["ortlab.kl_divergence(fp32, ortlab.quantize(fp32, mode='int4'))"],
    ),
    ("`ortlab.doctor(llm)` (the generation stage included)", ["ortlab.doctor(llm) (budget 120 s)"]),
    (
        "`ortlab.generate(whisper)` (an encoder-decoder: the encoder each run)",
        ["ortlab.generate(whisper) (an encoder-decoder)"],
    ),
]
"""The README's table: each row's words and the recorded calls its seconds come from."""


def load_record(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text())
    return data


def fast_tier_text(rec: dict[str, Any]) -> str:
    """The README's sentence on the fast tier, from its record."""
    return (
        f"`./run-tests --fast` ({rec['tests']} tests in {rec['seconds']:.0f} s on "
        f"{rec['machine']['date'][:10]}, {rec['cores']} cores, lint and types before them)"
    )


def durations_table(rec: dict[str, Any]) -> str:
    """The README's table of durations, from readme_durations' record."""
    rows = rec["rows"]
    lines = ["| call | seconds |", "|---|---|"]
    for words, keys in DURATION_ROWS:
        seconds = " · ".join(f"{rows[k]['seconds']:.1f}" for k in keys)
        lines.append(f"| {words} | {seconds} |")
    return "\n".join(lines)


def rendered() -> dict[str, str]:
    """Each marked figure of the README as the records give it."""
    return {
        "fast-tier": fast_tier_text(load_record("fast_tier")),
        "durations": durations_table(load_record("readme_durations")),
    }


def marked(text: str, name: str) -> str:
    """What the README holds between the markers of ``name`` ('' when they are missing)."""
    found = re.search(rf"<!-- {name} -->\n?(.*?)\n?<!-- /{name} -->", text, re.S)
    return found.group(1) if found else ""


def rewrite() -> None:
    text = README.read_text()
    for name, body in rendered().items():
        text, n = re.subn(
            rf"<!-- {name} -->\n?.*?\n?<!-- /{name} -->",
            lambda _m, b=body, n=name: f"<!-- {n} -->{_sep(n)}{b}{_sep(n)}<!-- /{n} -->",
            text,
            flags=re.S,
        )
        if n != 1:
            raise SystemExit(f"README.md has no <!-- {name} --> markers")
    README.write_text(text)


def _sep(name: str) -> str:
    return "\n" if name == "durations" else ""


def run_fast_tier() -> None:
    """Run the fast tier as ./run-tests --fast's pytest does and record its count and time."""
    import psutil

    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "--dist",
            "worksteal",
            "-m",
            FAST_SELECTION,
            "-p",
            "no:cacheprovider",
            # the tests that read this record cannot pass before it is written
            "--deselect",
            "tests/test_readme_figures.py::test_the_readme_figures_are_the_recorded_ones",
            "--deselect",
            "tests/test_readme_figures.py::test_the_fast_tier_record_counts_todays_tests",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    got = re.search(r"(\d+) passed", tail)
    if done.returncode != 0 or not got:
        failed = "\n".join(x for x in done.stdout.splitlines() if x.startswith(("FAILED", "ERROR")))
        raise SystemExit(f"the fast tier did not pass: {tail or done.stderr[-800:]}\n{failed}")
    data = {
        "tests": int(got.group(1)),
        "seconds": round(seconds, 1),
        "cores": psutil.cpu_count(),
    }
    record(
        "fast_tier",
        data,
        f"{data['tests']} tests passed in {seconds:.0f} s (pytest, {FAST_SELECTION}).",
    )


if __name__ == "__main__":
    if "--fast-tier" in sys.argv:
        run_fast_tier()
    rewrite()
