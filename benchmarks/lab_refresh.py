"""Time from a Lab toggle to refreshed views on ResNet-50 (176 nodes) and a real 1,493-node
Paddle export (PicoDet, from the test corpus), split into ORT's own time (session builds,
profiled runs, benchmark runs incl. warm-up) and ortlab's overhead (worker start and round
trips, parsing, the join, graph data, figures, widget updates). The first refresh (the Lab's
own, at construction, in a fresh process) is listed too. Browser paint is not included: the
views are sent to the front end when the Python side returns.

    .venv/bin/python -m benchmarks.lab_refresh
"""

from __future__ import annotations

import numpy as np

import ortlab
from benchmarks._common import record
from ortlab.views.widgets.lab import Lab


def main(toggles: int = 8) -> None:
    from tests import corpus

    lines, data = [], {}
    cases = [("ResNet-50", lambda: ortlab.examples.load("resnet50")),
             ("PicoDet (1,493 nodes)", lambda: corpus.load("picodet_layout"))]  # fmt: skip
    for name, make in cases:
        lab = Lab(make(), runs=20, synchronous=True)
        levels = ["disabled", "all", "basic", "all", "extended", "all", "layout", "all"]
        for level in levels[:toggles]:
            lab.level.value = level
        t = lab.history.to_pandas()
        ort_s = t["seconds"] - t["overhead_s"]
        lines += [f"### {name}", "",
                  "| run | setting | refresh s | ORT s (builds + runs) | ortlab overhead s |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r, o in zip(t.itertuples(), ort_s, strict=True):
            first = " (first, at construction)" if r.run == 1 else ""
            lines.append(f"| {r.run}{first} | {r.label} | {r.seconds:.2f} | {o:.2f} | "
                         f"{r.overhead_s:.3f} |")  # fmt: skip
        over = t["overhead_s"].to_numpy()[1:]
        lines += ["", f"ortlab overhead per toggle: median {np.median(over):.3f} s, max "
                  f"{over.max():.3f} s over {len(over)} toggles; the first refresh "
                  f"{t['overhead_s'].iloc[0]:.3f} s (goal ≤ 0.3 s for all).", ""]  # fmt: skip
        data[name] = t.drop(columns=["config"], errors="ignore").to_dict(orient="records")
        lab.close()
    record("lab_refresh", {"rows": data}, "\n".join(lines))


if __name__ == "__main__":
    main()
