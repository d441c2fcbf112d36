"""How much of a dynamo-exported Llama's decode time ``by_layer()`` finds inside its layers, on
decoders of realistic proportions (issue 46 item 1).

The bundled ``tiny_llama_dynamo`` (2 layers, hidden 64) proves the attribution node by node
(tests/test_layers.py: every profiled node's layer is the one its module path names), but its
layers are so small that the work dynamo emits once per step outside them (the causal mask,
positions, rotary tables, the embedding and the LM head: ~60 small nodes) is a quarter of the
step. Here the same exporter (``torch.onnx.export(dynamo=True)``, random weights from a config
in code, no hub download) makes Llamas whose layers have the shapes of small real ones, in the
scratch venv ``scripts/make_decoders.py`` builds (torch + transformers, never a dependency of
ortlab), cached outside the repository; ortlab then generates with each and reports the share
of the decode node time (the profiled steps' median per node, as ``by_layer()`` gives it) in
layers, and checks every layer was found with no layer index in any node name.

    python benchmarks/dynamo_layers.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx

import ortlab
from benchmarks._common import record

CACHE = Path(
    os.environ.get("ORTLAB_DECODERS_CACHE") or Path("~/.cache/ortlab-decoders").expanduser()
)
VENV = CACHE / "venv-genai" / "bin" / "python"  # torch, transformers 5, onnxscript
SHAPES = {  # name: (layers, hidden, intermediate, heads, kv heads, vocab)
    "dynamo_llama_4x256": (4, 256, 688, 8, 4, 8000),
    "dynamo_llama_8x512": (8, 512, 1376, 8, 4, 8000),
}

EXPORT = textwrap.dedent(
    """
    import sys
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, sys.argv[1])
    from make_decoders import export_dynamo

    out, layers, hidden, inter, heads, kv_heads, vocab = sys.argv[2], *map(int, sys.argv[3:])
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=2048,
    )
    export_dynamo(LlamaForCausalLM(config).eval(), out, max_len=2048)
    """
)
"""The export in the scratch venv: a Llama from a config in code, through
``scripts/make_decoders.py``'s own dynamo export (the bundled ``dynamo_llama``'s)."""

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def exported(name: str) -> Path:
    path = CACHE / "dynamo-deep" / name / "model.onnx"
    if not path.exists():
        if not VENV.exists():
            sys.exit(f"{VENV} is missing: run scripts/make_decoders.py once to build it")
        path.parent.mkdir(parents=True, exist_ok=True)
        dims = [str(x) for x in SHAPES[name]]
        subprocess.run([str(VENV), "-c", EXPORT, str(SCRIPTS), str(path), *dims], check=True)
    return path


def main() -> None:
    rows = []
    for name, (layers, hidden, inter, heads, kv_heads, vocab) in SHAPES.items():
        path = exported(name)
        proto = onnx.load(str(path), load_external_data=False)
        indexed = [n.name for n in proto.graph.node if re.search(r"layers?[._]\d", n.name)]
        m = ortlab.load(path)
        g = ortlab.generate(m, prompt=128, new_tokens=64, progress=False)
        t = g.by_layer()
        decode = t[t["phase"] == "decode"]
        inside = float(decode[decode["layer"] >= 0]["share"].sum())
        found = sorted(int(x) for x in set(decode["layer"]) if x >= 0)
        rows.append(
            {
                "model": name,
                "layers": layers,
                "hidden": hidden,
                "intermediate": inter,
                "heads": f"{heads} / {kv_heads} KV",
                "vocab": vocab,
                "nodes": len(proto.graph.node),
                "names with a layer index": len(indexed),
                "heads found": m.decoder.heads if m.decoder else None,
                "layers found": len(found),
                "decode share inside layers": inside,
                "decode tokens/s": g.decode_tokens_per_s[0],
            }
        )
        print(rows[-1], flush=True)
    lines = [
        "Decode node time inside the layers, as `GenerationResult.by_layer()` reads it, on "
        "Llamas exported by `torch.onnx.export(dynamo=True)` (random weights from a config in "
        "code), prompt 128, 64 new tokens, the profiled steps' median per node.",
        "",
        "| model | layers | hidden | heads | vocab | nodes | names with a layer index | "
        "layers found | heads found | decode share inside layers | decode tokens/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['layers']} | {r['hidden']} | {r['heads']} | {r['vocab']} | "
            f"{r['nodes']} | {r['names with a layer index']} | {r['layers found']} | "
            f"{r['heads found']} | {r['decode share inside layers']:.1%} | "
            f"{r['decode tokens/s']:,.0f} |"
        )
    record("dynamo_layers", {"rows": rows}, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
