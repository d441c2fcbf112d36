"""``ortlab.styled``: a result's table shown one way per unit, its numbers untouched."""

from __future__ import annotations

import math
import re

import pandas as pd

import ortlab


def test_each_column_is_shown_in_its_unit_and_the_frame_keeps_its_numbers() -> None:
    frame = pd.DataFrame(
        {
            "phase": ["decode", "prefill"],
            "layer": [0, -1],
            "us_per_step": [1234.56, 7.0],
            "share": [0.4567, math.nan],
            "ttft_ms": [0.72049, 12.5],
            "bytes": [2048.0, 3 * 1024**2],
            "achieved_flops": [2.5e9, 1e12],
            "decode_tokens_per_s": [13456.7, 9.2],
        }
    )
    before = frame.copy()
    html = ortlab.styled(frame).to_html()
    cells = re.findall(r">([^<>]+)</td>", html)
    assert cells[:8] == [
        "decode",
        "0",
        "1,235 µs",
        "45.7%",
        "720 µs",
        "2.0 KB",
        "2.5 GFLOP/s",
        "13,457",
    ]
    assert cells[8:] == ["prefill", "-1", "7 µs", "—", "12.5 ms", "3.0 MB", "1 TFLOP/s", "9.20"]
    pd.testing.assert_frame_equal(frame, before)
    assert "row0" in html and '<th class="blank level0"' not in html  # index hidden
    assert "max-width: 24em" in html and "overflow-wrap: anywhere" in html  # long names wrap
