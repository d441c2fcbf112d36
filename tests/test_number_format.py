"""One format per unit (issue 62 item 4): every result a newcomer's first hour makes, rendered
as text and HTML, shows no raw float repr (``0.351943``, ``168033.43``), no rate of five or
more digits without thousands separators, and no decimals on a rate past a thousand; the
formatter's own rules are checked against hand-computed strings."""

from __future__ import annotations

import html
import re

import pytest

import ortlab
from ortlab.core.units import fmt_interval, fmt_ms, fmt_num, fmt_pm, fmt_rate

RATE_UNITS = r"(?:tokens/s|runs/s|req/s|requests/s|t/s)"
RAW_FLOAT = re.compile(r"(?<![\w.])\d+\.\d{5,}(?![\w])")
"""Five or more decimals: a float printed as Python prints it, not as a person reads it."""
UNSEPARATED = re.compile(rf"(?<![\w.,/])\d{{4,}}(?:\.\d+)? ?{RATE_UNITS}")
PAST_100 = r"(?<![\w.,/])(?:\d{1,3}(?:,\d{3})+|\d{3})"
DECIMALS_PAST_100 = re.compile(rf"{PAST_100}\.\d+ ?{RATE_UNITS}")


def test_the_formatter_reads_as_a_person_would() -> None:
    assert fmt_num(262977.4) == "262,977" and fmt_num(34399.1) == "34,399"
    assert fmt_num(34.41) == "34.4" and fmt_num(5.734) == "5.73" and fmt_num(0.0332) == "0.0332"
    assert fmt_rate(24328.9, "runs/s") == "24,329 runs/s"
    assert fmt_ms(0.0332) == "33.2 µs" and fmt_ms(32.273) == "32.3 ms" and fmt_ms(1234) == "1.23 s"
    assert fmt_interval(0.0332, 0.0323, 0.0361) == "33.2 µs [32.3, 36.1]"
    assert fmt_interval(6057.9, 5727.5, 6347.4, "tokens/s") == "6,058 tokens/s [5,728, 6,347]"
    assert fmt_interval(1.5, float("nan"), float("nan")) == "1.50 ms"
    assert fmt_pm(178861.48, 1203.2) == "178,861 ± 1,203" and fmt_pm(12.345, 0.5) == "12.3 ± 0.5"


def _visible(text: str) -> str:
    """HTML as the page shows it: no style, script or tags; entities decoded."""
    text = re.sub(r"<(style|script)\b.*?</\1>", " ", text, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def _check(name: str, shown: str) -> None:
    for pattern, what in (
        (RAW_FLOAT, "a raw float"),
        (UNSEPARATED, "a rate without thousands separators"),
        (DECIMALS_PAST_100, "decimals on a rate past a hundred"),
    ):
        found = pattern.findall(shown)
        assert not found, f"{name}: {what}: {found[:5]}"


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    """The results of a first hour: a CNN benchmarked, profiled, placed, costed and put on the
    roofline, compared across levels and run under concurrency; a decoder generated and
    llama-benched."""
    m = ortlab.examples.load("mlp")
    llm = ortlab.examples.load("tiny_llama_int4")
    return {
        "benchmark": ortlab.benchmark(m, runs=50, progress=False),
        "profile": ortlab.profile(m, runs=5, progress=False),
        "placement": ortlab.placement(m, runs=3, progress=False),
        "cost": ortlab.cost(m, progress=False),
        "compare_configs": ortlab.compare_configs(
            m, [{"level": "disabled"}, {"level": "all"}], rounds=6, runs=20, progress=False
        ),
        "throughput": ortlab.throughput(
            m, concurrency=(1, 2), duration_s=0.2, rounds=2, progress=False
        ),
        "generate": ortlab.generate(llm, prompt=8, new_tokens=8, runs=2, progress=False),
        "llm_bench": ortlab.llm_bench(
            llm, prompt=(8,), new_tokens=(4,), repetitions=2, progress=False
        ),
    }


@pytest.mark.parametrize(
    "name",
    [
        "benchmark",
        "profile",
        "placement",
        "cost",
        "compare_configs",
        "throughput",
        "generate",
        "llm_bench",
    ],
)
def test_no_result_shows_a_number_in_another_dialect(results: dict[str, object], name: str) -> None:
    r = results[name]
    _check(f"{name} text", r.to_text())  # type: ignore[attr-defined]
    _check(f"{name} html", _visible(r._repr_html_()))  # type: ignore[attr-defined]
    _check(f"{name} repr", repr(r))
