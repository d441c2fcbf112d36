"""How long the README's examples take, on the bundled ResNet-50 and (its LLM lines) the bundled
Llamas and Whisper, each in a fresh process with an empty cache (a first call builds every
variant it needs, as a user's first call does), with the machine's load while it ran: what the
README's tables of durations quote.

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
LLM_SETUP = (
    "import ortlab; llm = ortlab.load(ortlab.examples.path('tiny_llama_int4').parent)\n"
    "fp32 = ortlab.load(ortlab.examples.path('tiny_llama_fp32').parent)\n"
    "whisper = ortlab.load(ortlab.examples.path('tiny_whisper').parent)\n"
)
LLM_CALLS = {
    "ortlab.generate(llm, prompt=32, new_tokens=16)": (
        "ortlab.generate(llm, prompt=32, new_tokens=16, progress=False)"
    ),
    "ortlab.llm_bench(llm, prompt=(64, 128), new_tokens=(32,), depth=(0, 256), repetitions=3)": (
        "ortlab.llm_bench(llm, prompt=(64, 128), new_tokens=(32,), depth=(0, 256), "
        "repetitions=3, progress=False)"
    ),
    "ortlab.kl_divergence(fp32, ortlab.quantize(fp32, mode='int4'))": (
        "ortlab.kl_divergence(fp32, ortlab.quantize(fp32, mode='int4'), progress=False)"
    ),
    "ortlab.doctor(llm) (budget 120 s)": "ortlab.doctor(llm, progress=False)",
    "ortlab.generate(whisper) (an encoder-decoder)": "ortlab.generate(whisper, progress=False)",
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
    calls = [(SETUP, name, call) for name, call in CALLS.items()]
    calls += [(LLM_SETUP, name, call) for name, call in LLM_CALLS.items()]
    for setup, name, call in calls:
        code = PROBE.format(setup=setup, call=call)
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
        "(224x224, batch 1; `m`), the int4 and fp32 Llamas of onnxruntime-genai's builder",
        "(`llm`, `fp32`) and optimum's Whisper, CPU EP, default settings; 'call' is the call",
        "itself (any variant's",
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
