"""Time from a Lab toggle to refreshed views on ResNet-50, split into ORT's own time (session
builds, profiled runs, benchmark runs incl. warm-up) and ortlab's overhead (worker round trips,
parsing, the join, graph data, figures, widget updates). Browser paint is not included: the
views are sent to the front end when the Python side returns.

    .venv/bin/python -m benchmarks.lab_refresh
"""

from __future__ import annotations

import numpy as np

import ortlab
from benchmarks._common import record
from ortlab.views.widgets.lab import Lab


def main(toggles: int = 8) -> None:
    lab = Lab(ortlab.examples.load("resnet50"), runs=20, synchronous=True)
    levels = ["disabled", "all", "basic", "all", "extended", "all", "layout", "all"]
    for level in levels[:toggles]:
        lab.level.value = level
    t = lab.history.to_pandas().iloc[1:]  # the first run includes importing and warming up
    ort_s = t["seconds"] - t["overhead_s"]
    lines = ["| run | setting | refresh s | ORT s (builds + runs) | ortlab overhead s |",
             "|---|---|---|---|---|"]  # fmt: skip
    for r, o in zip(t.itertuples(), ort_s, strict=True):
        lines.append(f"| {r.run} | {r.label} | {r.seconds:.2f} | {o:.2f} | {r.overhead_s:.3f} |")
    over = t["overhead_s"].to_numpy()
    lines += ["", f"ortlab overhead per toggle: median {np.median(over):.3f} s, max "
              f"{over.max():.3f} s (goal ≤ 0.3 s) over {len(over)} toggles."]  # fmt: skip
    record("lab_refresh", {"rows": t.to_dict(orient="records")}, "\n".join(lines))


if __name__ == "__main__":
    main()
