"""How long the README's examples take, on the bundled ResNet-50, each in a fresh process with
an empty cache (a first call builds every variant it needs, as a user's first call does), with
the machine's load while it ran: what the README's table of durations quotes.

    python -m benchmarks.readme_durations
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks._common import record

SETUP = "import ortlab; m = ortlab.examples.load('resnet50'); feeds = m.example_inputs(seed=0)\n"
CALLS = {
    "ortlab.benchmark(m, runs=200)": "ortlab.benchmark(m, runs=200, progress=False)",
    "ortlab.profile(m, runs=20)": "ortlab.profile(m, runs=20, progress=False)",
    "ortlab.placement(m)": "ortlab.placement(m, progress=False)",
    "ortlab.compare_configs(m, [disabled, all])": (
        "ortlab.compare_configs(m, [{'level': 'disabled'}, {'level': 'all'}], progress=False)"
    ),
    "ortlab.optimization_diff(m)": "ortlab.optimization_diff(m, progress=False)",
    "ortlab.quantize(m, mode='static')": "ortlab.quantize(m, mode='static')",
    "ortlab.compare(m, [static int8, dynamic int8, fp16])": (
        "ortlab.compare(m, [ortlab.quantize(m, mode='static'), "
        "ortlab.quantize(m, mode='dynamic'), ortlab.to_fp16(m)], progress=False)"
    ),
    "ortlab.roofline(m)": "ortlab.roofline(m, progress=False)",
    "ortlab.throughput(m, concurrency=[1, 2])": (
        "ortlab.throughput(m, concurrency=[1, 2], progress=False)"
    ),
    "ortlab.doctor(m) (budget 120 s)": "ortlab.doctor(m, progress=False)",
    "ortlab.Lab(m) to its first run (sync)": "ortlab.Lab(m, sync=True, runs=30)",
}
PROBE = """
import json, time
from ortlab.core.machine import cpu_sample, other_cores
{setup}
before, t0 = cpu_sample(), time.perf_counter()
{call}
seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "load": other_cores(before, cpu_sample())}}))
"""


def main() -> None:
    rows = {}
    for name, call in CALLS.items():
        code = PROBE.format(setup=SETUP, call=call)
        with tempfile.TemporaryDirectory(prefix="ortlab-cold-") as cold:
            env = {**os.environ, "ORTLAB_CACHE_DIR": cold}
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
            ).stdout
        got = json.loads(out.strip().splitlines()[-1])
        got["process_s"] = time.perf_counter() - t0
        rows[name] = got
        print(f"{name}: {got['seconds']:.1f} s (load {got['load']:.2f})", flush=True)
    lines = [
        "Each call in a fresh process with an empty ortlab cache, on the bundled ResNet-50",
        "(224x224, batch 1), CPU EP, default settings; 'call' is the call itself (any variant's",
        "build included; the worker is already up: building the example started it), 'process'",
        "adds Python's start, `import ortlab` and building the example; load is other processes'",
        "cores meanwhile.",
        "",
        "| call | call s | process s | other processes' cores |",
        "|---|---|---|---|",
        *(
            f"| `{k}` | {v['seconds']:.1f} | {v['process_s']:.1f} | {v['load']:.2f} |"
            for k, v in rows.items()
        ),
    ]
    record("readme_durations", {"rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
