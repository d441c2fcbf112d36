#!/usr/bin/env python3
"""Make the tiny LLM decoder corpus in ortlab/decoders/ with the real exporters (issue 39).

Not run by CI: the exporters need torch and transformers. Run it by hand with Python 3.11:

    python3 scripts/make_decoders.py      # scratch venvs, exports, checks, README + reference.json

It builds two scratch virtualenvs outside the repository (under $ORTLAB_DECODERS_CACHE, else
$XDG_CACHE_HOME/ortlab-decoders, else ~/.cache/ortlab-decoders), because onnxruntime-genai
0.18.0's model builder imports names that exist only in transformers 5.x while optimum-onnx 0.1.0
(the ONNX exporter that left optimum in 2.x) requires transformers < 4.58:

  * "genai":   torch (CPU), transformers 5, onnx, onnx-ir, onnxruntime, onnxruntime-genai 0.18.0
  * "optimum": torch (CPU), transformers 4.57, optimum 2.1, optimum-onnx 0.1.0, onnx, onnxruntime

Then each step runs in the venv it needs (the script re-runs itself there with --stage):

  hf       (optimum) random-initialised tiny Llama and GPT-2 from configs in code (fixed seed, no
           hub download), a minimal offline WordLevel tokenizer (the genai builder insists on
           one), saved with save_pretrained under the cache's hf/, and torch's own greedy tokens;
  genai    (genai)   `python -m onnxruntime_genai.models.builder -i hf/llama -o genai_int4 -p int4
           -e cpu`, and again with `-p fp32` -> genai_int4/, genai_fp32/;
  optimum  (optimum) the tiny GPT-2 exported without and with past inputs and merged by
           optimum.onnx.merge_decoders (the whole graph in an If on use_cache_branch)
           -> optimum_gpt2_merged/; the tiny Llama by optimum-onnx's default with-past export
           (one model.onnx with past/present pairs, the genai folders' weights) -> optimum_llama/;
  families (genai)   decoders whose carried state is not one growing K/V (FAMILIES), each from its
           config with its torch greedy tokens, then genai's builder: a Gemma 2 (sliding-window
           and global layers, int4), an LFM2 (convolution states beside attention, int4) and a
           gpt-oss (mixture of experts, sliding window; fp32) -> genai_gemma2_int4/,
           genai_lfm2_int4/, genai_gptoss_fp32/;
  multimodel (genai) a tiny Whisper through genai's builder: a folder of two models (encoder.onnx,
           decoder.onnx) named by genai_config.json, genai's generator's tokens and a plain
           onnxruntime loop's in its multimodel.json -> genai_whisper/;
  verify   (genai)   plain onnxruntime runs a prefill, a decode step and a 16-token greedy loop on
           every model; onnxruntime-genai's generator runs greedy on the genai folders; both must
           agree (and agree with torch where the weights are the same); writes README.md and
           reference.json beside the folders.

Only what a user of each exporter ships is kept (model, external data, configs, the genai
tokenizer); the HF checkpoints and the venvs stay in the cache. The output is byte-reproducible.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DEFAULT = ROOT / "ortlab" / "decoders"

SEED = 0
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
NEW_TOKENS = 16

# The tiny models' shapes, distinct where they can be (batch 1, KV heads 2, heads 4, head size
# 16, hidden 64) so that a swapped axis shows. initializer_range 0.2, not HF's 0.02: at 0.02 the
# Llama's logits are nearly flat (top-1 beats top-2 by 0.003 at worst over the greedy steps; 0.08
# at 0.2), and the GPT-2, whose lm_head is wte, repeats the last prompt token for ever (8, 8, ...),
# which would hide a wrong past.
LLAMA = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "initializer_range": 0.2,
}
GPT2 = {
    "vocab_size": 1000,
    "n_positions": 256,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_inner": 256,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "initializer_range": 0.2,
}

# torch: this machine's pip has a local CPU wheel (torch==2.13.0+cpu); elsewhere the CPU index,
# and plain PyPI (which pulls the CUDA libraries: large, but it works) as the last resort.
TORCH_TRIES = [
    ["torch==2.13.0+cpu"],
    ["--index-url", "https://download.pytorch.org/whl/cpu", "torch==2.13.0"],
    ["torch==2.13.0"],
]
VENVS = {
    "genai": [
        "transformers==5.24.0",
        "onnx==1.23.2",
        "onnx-ir==1.1.0",  # the builder imports it but does not depend on it
        "safetensors",
        "onnxruntime==1.31.1",
        "onnxruntime-genai==0.18.0",
        # torch.onnx.export(dynamo=True) translates through onnxscript (not a torch dependency)
        "onnxscript==0.7.2",
    ],
    "optimum": [
        "transformers==4.57.6",
        "optimum==2.1.0",
        "optimum-onnx==0.1.0",
        "onnx==1.23.2",
        "onnxruntime==1.31.1",
        "tokenizers",
        "safetensors",
        # optimum's tied-weight deduplication needs accelerate (GPT-2's lm_head is wte): without
        # it the merged GPT-2 carries the 1000x64 table twice (878 KB -> 1.13 MB).
        "accelerate==1.15.0",
    ],
}
STAGE_VENV = {
    "hf": "optimum",
    "genai": "genai",
    "optimum": "optimum",
    "dynamo": "genai",
    "seq2seq": "optimum",
    "corpus": "genai",
    "families": "genai",
    "multimodel": "genai",
    "verify": "genai",
}
VERSION_NAMES = [
    "torch",
    "transformers",
    "onnx",
    "onnx-ir",
    "onnxruntime",
    "onnxruntime-genai",
    "onnxscript",
    "optimum",
    "optimum-onnx",
    "accelerate",
]

GEMMA2 = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "query_pre_attn_scalar": 16,
    "max_position_embeddings": 2048,
    # a short window, so that 8 prompt + 16 new tokens run past it (Gemma 2's is 4096); layers
    # alternate sliding and global (layer_types), as Gemma 2's do
    "sliding_window": 8,
    "initializer_range": 0.2,
    # untied: Gemma's tied head on its scaled embedding repeats the last prompt token for ever
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
"""A Gemma-2-shaped decoder (issue 60): sliding-window layers 0 and 2, whose cache genai's
builder makes a fixed buffer of window slots (GroupQueryAttention's sliding_window_cache), and
global layers 1 and 3."""
LFM2 = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    # short-convolution layers (a fixed state of hidden x (L_cache - 1) carried each step)
    # between attention layers, as LFM2's are
    "layer_types": ["conv", "full_attention", "conv", "full_attention"],
    "conv_L_cache": 3,
    "initializer_range": 0.2,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
"""An LFM2-shaped hybrid decoder (issue 60): its carried state is a convolution state in
layers 0 and 2 (CausalConvWithState, past.N.conv -> present.N.conv) and K/V in 1 and 3."""
GPTOSS = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "sliding_window": 8,
    "max_position_embeddings": 2048,
    "initializer_range": 0.2,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
"""A gpt-oss-shaped mixture of experts (issue 60): 4 experts, 2 per token (genai's MoE op),
a sliding-window layer and a global one. fp32: genai's int4 path for gpt-oss reads the
checkpoint's original MXFP4 tensors, which a config-built model does not have."""
FAMILIES = {
    "genai_gemma2_int4": ("gemma2", "Gemma2ForCausalLM", "Gemma2Config", GEMMA2, "int4"),
    "genai_lfm2_int4": ("lfm2", "Lfm2ForCausalLM", "Lfm2Config", LFM2, "int4"),
    "genai_gptoss_fp32": ("gptoss", "GptOssForCausalLM", "GptOssConfig", GPTOSS, "fp32"),
}

GENAI_RUNS = {"genai_int4": "int4", "genai_fp32": "fp32"}
OPTIMUM_CONFIGS = ("config.json", "generation_config.json")
HOW = {
    "dynamo_llama": (
        "torch.onnx.export(dynamo=True) of the tiny Llama behind a flat forward (input_ids, "
        "attention_mask, position_ids, past_key_values.N.key/value in; logits, present.N.* out; "
        "a transformers DynamicCache built inside), dynamic batch, sequence and past; only "
        "model.onnx, as the exporter writes it: no config beside it, node names with no layer "
        "index (node_MatMul_41), the module path in node metadata",
        "torch.onnx.export(Flat(LlamaForCausalLM.from_pretrained(<hf>/llama)), (ids, mask, pos, "
        "*past), 'model.onnx', dynamo=True, input_names=[...], output_names=[...], "
        "dynamic_shapes={...}, external_data=False)",
    ),
    "genai_int4": (
        "onnxruntime-genai's model builder, int4 for CPU, its defaults (block_size 32, "
        "accuracy_level 4, symmetric, RTN; lm_head quantized too, embedding kept fp32)",
        "python -m onnxruntime_genai.models.builder -i <hf>/llama -o genai_int4 -p int4 -e cpu "
        "-c <scratch>",
    ),
    "genai_gemma2_int4": (
        "onnxruntime-genai's model builder, int4 for CPU, of a Gemma-2-shaped decoder "
        "(Gemma2ForCausalLM, 4 layers, sliding_window 8: layers 0 and 2 sliding with a fixed "
        "8-slot cache buffer, 1 and 3 global; attention softcap 50, final logit softcap 30)",
        "python -m onnxruntime_genai.models.builder -i <hf>/gemma2 -o genai_gemma2_int4 -p int4 "
        "-e cpu -c <scratch>",
    ),
    "genai_lfm2_int4": (
        "onnxruntime-genai's model builder, int4 for CPU, of an LFM2-shaped hybrid decoder "
        "(Lfm2ForCausalLM, 4 layers: short convolutions in 0 and 2, carried as past.N.conv -> "
        "present.N.conv, attention in 1 and 3)",
        "python -m onnxruntime_genai.models.builder -i <hf>/lfm2 -o genai_lfm2_int4 -p int4 "
        "-e cpu -c <scratch>",
    ),
    "genai_gptoss_fp32": (
        "onnxruntime-genai's model builder, fp32 for CPU, of a gpt-oss-shaped mixture of "
        "experts (GptOssForCausalLM, 2 layers, 4 experts, 2 per token in genai's MoE op; layer 0 "
        "a sliding window of 8 with a fixed buffer, layer 1 global)",
        "python -m onnxruntime_genai.models.builder -i <hf>/gptoss -o genai_gptoss_fp32 -p fp32 "
        "-e cpu -c <scratch>",
    ),
    "genai_fp32": (
        "onnxruntime-genai's model builder, fp32 for CPU",
        "python -m onnxruntime_genai.models.builder -i <hf>/llama -o genai_fp32 -p fp32 -e cpu "
        "-c <scratch>",
    ),
    "optimum_gpt2_merged": (
        "optimum-onnx's main_export twice (without, then with past inputs) and "
        "optimum.onnx.merge_decoders, the merge that optimum 1.x's `--legacy` made "
        "(optimum-onnx kept the function but no option that calls it)",
        "main_export(<hf>/gpt2, a, task='text-generation-with-past', custom_onnx_configs="
        "{'model': GPT2OnnxConfig(cfg, task='text-generation', use_past=True, "
        "use_past_in_inputs=False)}); main_export(<hf>/gpt2, b, task='text-generation-with-past'); "
        "merge_decoders(a/model.onnx, b/model.onnx, save_path='decoder_model_merged.onnx')",
    ),
    "optimum_llama": (
        "optimum-onnx's main_export, default text-generation-with-past (one model; prefill "
        "feeds an empty past)",
        "optimum-cli export onnx --model <hf>/llama --task text-generation-with-past <out> "
        "(= main_export(<hf>/llama, <out>, task='text-generation-with-past'))",
    ),
}


def log(*parts) -> None:
    print("make_decoders:", *parts, flush=True)


def cache_dir() -> Path:
    if os.environ.get("ORTLAB_DECODERS_CACHE"):
        return Path(os.environ["ORTLAB_DECODERS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser()
    return Path(base) / "ortlab-decoders"


def run(cmd: list, **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


# ------------------------------------------------------------------------- the venvs (outer)


def ensure_venv(name: str) -> Path:
    venv = cache_dir() / f"venv-{name}"
    python = venv / "bin" / "python"
    want = hashlib.sha256(json.dumps([TORCH_TRIES, VENVS[name]]).encode()).hexdigest()
    stamp = venv / ".made-by-make_decoders"
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    if venv.exists():
        shutil.rmtree(venv)
    run([sys.executable, "-m", "venv", venv])
    for attempt in TORCH_TRIES:
        try:
            run([python, "-m", "pip", "install", "--quiet", *attempt])
            break
        except subprocess.CalledProcessError:
            log(f"torch install {attempt} failed, trying the next route")
    else:
        raise SystemExit("make_decoders: no route to a torch wheel")
    run([python, "-m", "pip", "install", "--quiet", *VENVS[name]])
    stamp.write_text(want)
    return python


def outer(args) -> None:
    pythons = {name: ensure_venv(name) for name in VENVS}  # verify reads both venvs' versions
    out = Path(args.out).resolve()
    for stage in STAGE_VENV:  # the corpus (not committed, large) only when asked for
        if stage in (args.only or []) or (not args.only and stage != "corpus"):
            run([pythons[STAGE_VENV[stage]], __file__, "--stage", stage, "--out", out])


# ------------------------------------------------------------------------- stage: hf


def make_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"w{i}": i for i in range(3, LLAMA["vocab_size"])})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}
    PreTrainedTokenizerFast(tokenizer_object=tok, **specials).save_pretrained(path)


def torch_greedy(model) -> list[int]:
    """Greedy in torch with its own KV cache: an oracle independent of every exporter."""
    import torch

    with torch.no_grad():
        out = model(torch.tensor([PROMPT]), use_cache=True)
        got: list[int] = []
        for _ in range(NEW_TOKENS):
            got.append(int(out.logits[0, -1].argmax()))
            ids = torch.tensor([[got[-1]]])
            out = model(ids, past_key_values=out.past_key_values, use_cache=True)
    return got


def stage_hf(_args) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    hf = cache_dir() / "hf"
    if hf.exists():
        shutil.rmtree(hf)
    sources = (
        ("llama", LlamaForCausalLM, LlamaConfig, LLAMA),
        ("gpt2", GPT2LMHeadModel, GPT2Config, GPT2),
    )
    for name, model_cls, config_cls, config in sources:
        torch.manual_seed(SEED)
        model = model_cls(config_cls(**config)).eval()
        model.generation_config.do_sample = False
        model.save_pretrained(hf / name, safe_serialization=True)
        make_tokenizer(hf / name)
        (hf / name / "torch_greedy.json").write_text(json.dumps(torch_greedy(model)))
        log(f"{name}: {sum(p.numel() for p in model.parameters()):,} parameters")


# ------------------------------------------------------------------------- stage: genai


def stage_genai(args) -> None:
    scratch = cache_dir() / "builder-cache"
    for name, precision in GENAI_RUNS.items():
        dest = Path(args.out) / name
        if dest.exists():
            shutil.rmtree(dest)
        hf = cache_dir() / "hf" / "llama"
        builder = [sys.executable, "-m", "onnxruntime_genai.models.builder"]
        run([*builder, "-i", hf, "-o", dest, "-p", precision, "-e", "cpu", "-c", scratch])
    shutil.rmtree(scratch, ignore_errors=True)


# ------------------------------------------------------------------------- stage: windowed


def stage_families(args) -> None:
    """Each FAMILIES decoder from its config (seed 0) with its torch greedy tokens (transformers'
    own cache: a sliding window, convolution states, experts), then genai's builder for the
    CPU."""
    import torch
    import transformers

    scratch = cache_dir() / "builder-cache"
    for folder, (source, model_cls, config_cls, config, precision) in FAMILIES.items():
        hf = cache_dir() / "hf" / source
        if hf.exists():
            shutil.rmtree(hf)
        torch.manual_seed(SEED)
        model_type = getattr(transformers, model_cls)
        model = model_type(getattr(transformers, config_cls)(**config)).eval()
        model.generation_config.do_sample = False
        model.save_pretrained(hf, safe_serialization=True)
        make_tokenizer(hf)
        (hf / "torch_greedy.json").write_text(json.dumps(torch_greedy(model)))
        dest = Path(args.out) / folder
        if dest.exists():
            shutil.rmtree(dest)
        builder = [sys.executable, "-m", "onnxruntime_genai.models.builder"]
        run([*builder, "-i", hf, "-o", dest, "-p", precision, "-e", "cpu", "-c", scratch])
    shutil.rmtree(scratch, ignore_errors=True)


# ------------------------------------------------------------------------- stage: corpus

CORPUS = {
    "phi3_longrope": (
        "Phi3ForCausalLM",
        "Phi3Config",
        {
            "vocab_size": 32064,
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "max_position_embeddings": 16384,  # a long cache, as Phi-3-mini-128k's LongRoPE
            "original_max_position_embeddings": 4096,
            "rope_scaling": {
                "type": "longrope",
                "short_factor": [1.0] * 32,
                "long_factor": [1.25 + 0.05 * i for i in range(32)],
            },
            "initializer_range": 0.2,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 0,
        },
    ),
    "qwen2_32k": (
        "Qwen2ForCausalLM",
        "Qwen2Config",
        {
            "vocab_size": 32000,
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "initializer_range": 0.2,
            "tie_word_embeddings": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 0,
        },
    ),
}
"""Decoders onnxruntime-genai's builder makes that are too large to commit (a 32k vocabulary:
16 MB of fp32 embedding and head): built into the cache (``corpus_dir()``), int4 and fp32, for
benchmarks/generate.py to hold ortlab's generator against genai's on."""


def corpus_dir() -> Path:
    return cache_dir() / "genai-corpus"


def stage_corpus(_args) -> None:
    """Each CORPUS architecture with random weights (seed 0), built by genai's builder for the
    CPU in int4 and fp32 into corpus_dir()/<name>_<precision>."""
    import torch
    import transformers

    out = corpus_dir()
    scratch = cache_dir() / "builder-cache"
    for name, (model_cls, config_cls, config) in CORPUS.items():
        hf = cache_dir() / "hf" / name
        torch.manual_seed(SEED)
        model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**config))
        model.eval().save_pretrained(hf, safe_serialization=True)
        make_tokenizer(hf)
        for precision in ("int4", "fp32"):
            dest = out / f"{name}_{precision}"
            if dest.exists():
                shutil.rmtree(dest)
            builder = [sys.executable, "-m", "onnxruntime_genai.models.builder"]
            run([*builder, "-i", hf, "-o", dest, "-p", precision, "-e", "cpu", "-c", scratch])
            log(f"{dest.name}: {sum(f.stat().st_size for f in dest.iterdir()):,} bytes")
    shutil.rmtree(scratch, ignore_errors=True)


# ------------------------------------------------------------------------- stage: optimum


def stage_optimum(args) -> None:
    from optimum.exporters.onnx import main_export
    from optimum.exporters.onnx.model_configs import GPT2OnnxConfig
    from optimum.onnx import merge_decoders
    from transformers import AutoConfig

    out = Path(args.out)
    hf = cache_dir() / "hf"
    task = "text-generation-with-past"

    # GPT-2, merged. optimum-onnx has no `--legacy` (decoder_model + decoder_with_past_model +
    # decoder_model_merged) and exports one model.onnx with past inputs; for a supported
    # architecture main_export ignores fn_get_submodels, so each half is exported as 'model' with
    # its export config and the two are merged by the function optimum's post-processing uses:
    # an If on use_cache_branch, then = with_past, else = no_past, weights in the outer graph.
    config = AutoConfig.from_pretrained(hf / "gpt2")
    no_past = GPT2OnnxConfig(
        config, task="text-generation", use_past=True, use_past_in_inputs=False
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        main_export(str(hf / "gpt2"), tmp / "a", task=task, custom_onnx_configs={"model": no_past})
        main_export(str(hf / "gpt2"), tmp / "b", task=task)
        merged = tmp / "decoder_model_merged.onnx"
        merge_decoders(tmp / "a" / "model.onnx", tmp / "b" / "model.onnx", save_path=merged)
        for config_name in OPTIMUM_CONFIGS:
            shutil.copy2(tmp / "b" / config_name, tmp / config_name)
        keep(tmp, out / "optimum_gpt2_merged", [merged.name, *OPTIMUM_CONFIGS])

    # Llama, optimum-onnx's default with-past export: one model.onnx with past/present pairs.
    with tempfile.TemporaryDirectory() as name:
        main_export(str(hf / "llama"), name, task=task)
        keep(Path(name), out / "optimum_llama", ["model.onnx", *OPTIMUM_CONFIGS])


# ------------------------------------------------------------------------- stage: dynamo


def stage_dynamo(args) -> None:
    """torch.onnx.export(dynamo=True): the exporter torch recommends since 2.9, whose node names
    carry no layer index (ortlab must read a node's layer from the graph)."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(cache_dir() / "hf" / "llama").eval()
    dest = Path(args.out) / "dynamo_llama"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    export_dynamo(model, dest / "model.onnx", max_len=4096)


def export_dynamo(model, out: Path, *, max_len: int) -> None:
    """``model`` (a transformers Llama) exported by torch.onnx.export(dynamo=True) to ``out``
    behind a flat forward (input_ids, attention_mask, position_ids, *past), its node metadata
    cut to the module paths (the stack traces name this machine's paths). Also used by
    benchmarks/dynamo_layers.py for Llamas of realistic size."""
    import torch
    from transformers.cache_utils import DynamicCache

    config = model.config
    layers = config.num_hidden_layers

    class Flat(torch.nn.Module):
        """The decoder with its cache as flat tensors, as ONNX runtimes feed it."""

        def __init__(self, llm) -> None:
            super().__init__()
            self.llm = llm

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.llm(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
            present = []
            for layer in out.past_key_values.layers:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    torch.manual_seed(SEED)
    batch, seq, past_len = 1, 4, 3
    shape = (batch, config.num_key_value_heads, past_len, config.head_dim)
    args_ = (
        torch.randint(3, config.vocab_size, (batch, seq)),
        torch.ones(batch, past_len + seq, dtype=torch.int64),
        torch.arange(past_len, past_len + seq).unsqueeze(0),
        *(torch.randn(shape) for _ in range(2 * layers)),
    )
    kv = [f"{i}.{part}" for i in range(layers) for part in ("key", "value")]
    b = torch.export.Dim("batch_size", max=64)
    s = torch.export.Dim("sequence_length", max=max_len)
    p = torch.export.Dim("past_sequence_length", max=max_len)
    dynamic = {
        "input_ids": {0: b, 1: s},
        "attention_mask": {0: b, 1: torch.export.Dim.DYNAMIC},
        "position_ids": {0: b, 1: s},
        "past": tuple({0: b, 2: p} for _ in kv),
    }
    torch.onnx.export(
        Flat(model).eval(),
        args_,
        str(out),
        dynamo=True,
        input_names=["input_ids", "attention_mask", "position_ids"]
        + [f"past_key_values.{k}" for k in kv],
        output_names=["logits"] + [f"present.{k}" for k in kv],
        dynamic_shapes=dynamic,
        external_data=False,
    )
    # the stack traces in node metadata name this machine's paths: keep the module path only
    import onnx

    m = onnx.load(str(out))
    keep_keys = {"namespace", "pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy"}
    for node in m.graph.node:
        kept = [(e.key, e.value) for e in node.metadata_props if e.key in keep_keys]
        del node.metadata_props[:]
        for key, value in kept:
            node.metadata_props.add(key=key, value=value)
    onnx.save(m, str(out))


# ------------------------------------------------------------------------- stage: seq2seq

WHISPER = {
    "vocab_size": 1000,
    "num_mel_bins": 80,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "d_model": 64,
    "encoder_ffn_dim": 256,
    "decoder_ffn_dim": 256,
    "max_source_positions": 1500,
    "max_target_positions": 128,
    "decoder_start_token_id": 3,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "init_std": 0.2,
    "begin_suppress_tokens": None,
    "suppress_tokens": None,
}
SEQ2SEQ_FILES = ["encoder_model.onnx", "decoder_model_merged.onnx", *OPTIMUM_CONFIGS]


T5 = {
    "vocab_size": 1000,
    "d_model": 64,
    "d_kv": 16,
    "d_ff": 256,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "num_heads": 4,
    "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": 32,
    "decoder_start_token_id": 0,
    "pad_token_id": 0,
    "eos_token_id": 1,
    # transformers' default init (factor 1) makes a tiny random T5 say its pad id for ever:
    # a reference that cannot tell a loop that works from one that does not
    "initializer_factor": 20.0,
}
T5_SOURCE = 12
"""The tiny T5's source sentence: this many ids."""


def stage_seq2seq(args) -> None:
    """A tiny Whisper (random weights, 1500 encoder frames as Whisper's) and a tiny T5, each
    exported by optimum-onnx's main_export with past (encoder_model.onnx +
    decoder_model_merged.onnx), and their greedy tokens from optimum's own
    ORTModelForSpeechSeq2Seq / ORTModelForSeq2SeqLM.generate on the folder and from a plain
    onnxruntime loop, both recorded in seq2seq.json (the reference ortlab's encoder-decoder
    support is checked against)."""
    import numpy as np
    import torch
    from optimum.exporters.onnx import main_export
    from optimum.onnxruntime import ORTModelForSeq2SeqLM, ORTModelForSpeechSeq2Seq
    from transformers import (
        T5Config,
        T5ForConditionalGeneration,
        WhisperConfig,
        WhisperForConditionalGeneration,
    )

    out = Path(args.out)
    rng = np.random.default_rng(SEED)
    features = rng.standard_normal((1, 80, 3000)).astype(np.float32)
    source = np.random.default_rng(SEED).integers(2, T5["vocab_size"], (1, T5_SOURCE))
    cases = [
        (
            "whisper",
            "optimum_whisper",
            WhisperForConditionalGeneration,
            WhisperConfig(**WHISPER),
            "automatic-speech-recognition-with-past",
            ORTModelForSpeechSeq2Seq,
            {"input_features": features},
            "numpy default_rng(0).standard_normal((1, 80, 3000)), float32",
            WHISPER,
        ),
        (
            "t5",
            "optimum_t5",
            T5ForConditionalGeneration,
            T5Config(**T5),
            "text2text-generation-with-past",
            ORTModelForSeq2SeqLM,
            {"input_ids": source, "attention_mask": np.ones_like(source)},
            f"input_ids numpy default_rng(0).integers(2, 1000, (1, {T5_SOURCE})), mask of ones",
            T5,
        ),
    ]
    for name, folder_name, cls, config, task, ort_cls, feeds, said, settings in cases:
        torch.manual_seed(SEED)
        model = cls(config).eval()
        if name == "whisper":
            model.generation_config.forced_decoder_ids = None
        hf = cache_dir() / "hf" / name
        model.save_pretrained(hf)
        with tempfile.TemporaryDirectory() as tmp:
            main_export(str(hf), tmp, task=task)
            keep(Path(tmp), out / folder_name, SEQ2SEQ_FILES)
        folder = out / folder_name
        ort_model = ort_cls.from_pretrained(folder, use_cache=True)
        theirs = ort_model.generate(
            **{k: torch.from_numpy(v) for k, v in feeds.items()},
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            num_beams=1,
        )[0].tolist()
        start = [settings["decoder_start_token_id"]]
        tokens = seq2seq_greedy(folder, feeds, start)
        if theirs[: len(start)] == start:
            theirs = theirs[len(start) :]  # generate's sequence opens with the start ids
        if theirs != tokens:
            raise SystemExit(f"make_decoders: {name}: optimum {theirs} != onnxruntime {tokens}")
        ref = {
            "feeds": said,
            "decoder_start": start,
            "new_tokens": NEW_TOKENS,
            "optimum_generate": theirs,
            "ort_greedy_tokens": tokens,
            f"{name}_config": settings,
        }
        (folder / "seq2seq.json").write_text(json.dumps(ref, indent=1) + "\n")
        log(f"{folder_name}: {tokens}")


def seq2seq_greedy(folder: Path, feeds: dict, start: list[int]) -> list[int]:
    """A plain onnxruntime greedy loop: the encoder once, then the merged decoder token by
    token; the self-attention cache grows from each step's present, the cross-attention
    cache is the first step's (the with-past branch returns a dummy in its place)."""
    import numpy as np
    import onnxruntime as ort

    enc = ort.InferenceSession(str(folder / "encoder_model.onnx"))
    dec = ort.InferenceSession(str(folder / "decoder_model_merged.onnx"))
    states = enc.run(None, feeds)[0]
    names = [o.name for o in dec.get_outputs()]
    inputs = {i.name: i for i in dec.get_inputs()}
    past = {
        n: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
        for n, i in inputs.items()
        if n.startswith("past_key_values.")
    }
    ids, tokens = list(start), []
    for step in range(NEW_TOKENS):
        step_feeds = {
            "input_ids": np.asarray([ids if step == 0 else ids[-1:]], np.int64),
            "encoder_hidden_states": states,
            "use_cache_branch": np.array([step > 0]),
            **past,
        }
        if "encoder_attention_mask" in inputs:
            step_feeds["encoder_attention_mask"] = feeds["attention_mask"]
        outs = dict(zip(names, dec.run(None, step_feeds), strict=True))
        tokens.append(int(outs["logits"][0, -1].argmax()))
        ids.append(tokens[-1])
        past.update(
            {
                k.replace("present", "past_key_values"): v
                for k, v in outs.items()
                if k != "logits" and (step == 0 or ".encoder." not in k)
            }
        )
    return tokens


# ------------------------------------------------------------------------- stage: multimodel

MULTIMODEL = "genai_whisper"
"""A folder of several models, as onnxruntime-genai's builder writes a speech model: encoder.onnx
(the audio encoder, which also computes each layer's cross-attention K/V) and decoder.onnx (the
text decoder, which reads them), both named by genai_config.json."""


def stage_multimodel(args) -> None:
    """The tiny Whisper (WHISPER, seed 0, every bias drawn from N(0, 0.2) as a trained
    checkpoint's are: genai's builder drops a zero bias, and onnxruntime 1.31.1's CPU Attention
    without its bias input crashes the process) through genai's builder, -p fp32 -e cpu; then
    genai's own generator (audio_features given as a tensor: no audio file, no processor) and
    a plain onnxruntime loop, which must agree; both recorded in multimodel.json."""
    import numpy as np
    import torch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    torch.manual_seed(SEED)
    model = WhisperForConditionalGeneration(WhisperConfig(**WHISPER)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.2)
    model.generation_config.forced_decoder_ids = None
    hf = cache_dir() / "hf" / "whisper_genai"
    if hf.exists():
        shutil.rmtree(hf)
    model.save_pretrained(hf, safe_serialization=True)
    WhisperFeatureExtractor(feature_size=WHISPER["num_mel_bins"]).save_pretrained(hf)
    make_tokenizer(hf)
    dest = Path(args.out) / MULTIMODEL
    if dest.exists():
        shutil.rmtree(dest)
    scratch = cache_dir() / "builder-cache"
    builder = [sys.executable, "-m", "onnxruntime_genai.models.builder"]
    run([*builder, "-i", hf, "-o", dest, "-p", "fp32", "-e", "cpu", "-c", scratch])
    shutil.rmtree(scratch, ignore_errors=True)
    features = np.random.default_rng(SEED).standard_normal((1, 80, 3000)).astype(np.float32)
    start = [WHISPER["decoder_start_token_id"]]
    theirs = genai_whisper_greedy(dest, features, start)
    tokens = whisper_genai_ort_greedy(dest, features, start)
    if theirs != tokens:
        raise SystemExit(f"make_decoders: {MULTIMODEL}: genai {theirs} != onnxruntime {tokens}")
    ref = {
        "feeds": "audio_features numpy default_rng(0).standard_normal((1, 80, 3000)), float32",
        "decoder_start": start,
        "new_tokens": NEW_TOKENS,
        "genai_generate": theirs,
        "ort_greedy_tokens": tokens,
        "whisper_config": WHISPER,
        "bias_init": "N(0, 0.2)",
    }
    (dest / "multimodel.json").write_text(json.dumps(ref, indent=1) + "\n")
    log(f"{MULTIMODEL}: {tokens}")


def genai_whisper_greedy(folder: Path, features, start: list[int]) -> list[int]:
    """onnxruntime-genai's generator on the folder, greedy, NEW_TOKENS after ``start``."""
    import numpy as np
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    total = len(start) + NEW_TOKENS
    params.set_search_options(max_length=total, min_length=total, do_sample=False)
    gen = og.Generator(model, params)
    named = og.NamedTensors()
    named["audio_features"] = features
    named["input_ids"] = np.asarray([start], np.int32)
    gen.set_inputs(named)
    while not gen.is_done():
        gen.generate_next_token()
    return [int(t) for t in gen.get_sequence(0)][len(start) :]


def whisper_genai_ort_greedy(folder: Path, features, start: list[int]) -> list[int]:
    """A plain onnxruntime loop over genai's two files: the encoder once (its states and each
    layer's cross K/V), then the decoder token by token, its self-attention cache growing, the
    cross-attention K/V the encoder's, as genai_config.json names them."""
    import numpy as np
    import onnxruntime as ort

    cfg = json.loads((folder / "genai_config.json").read_text())["model"]
    enc = ort.InferenceSession(str(folder / cfg["encoder"]["filename"]))
    dec = ort.InferenceSession(str(folder / cfg["decoder"]["filename"]))
    made = dict(
        zip([o.name for o in enc.get_outputs()], enc.run(None, {"audio_features": features}))
    )
    layers = cfg["decoder"]["num_hidden_layers"]
    ins, outs = cfg["decoder"]["inputs"], cfg["encoder"]["outputs"]
    cross = {
        ins[f"cross_past_{kv}_names"] % i: made[outs[f"cross_present_{kv}_names"] % i]
        for i in range(layers)
        for kv in ("key", "value")
    }
    heads, size = cfg["decoder"]["num_key_value_heads"], cfg["decoder"]["head_size"]
    past = {
        ins[f"past_{kv}_names"] % i: np.zeros((1, heads, 0, size), np.float32)
        for i in range(layers)
        for kv in ("key", "value")
    }
    present = {
        cfg["decoder"]["outputs"][f"present_{kv}_names"] % i: ins[f"past_{kv}_names"] % i
        for i in range(layers)
        for kv in ("key", "value")
    }
    names = [o.name for o in dec.get_outputs()]
    ids, tokens = list(start), []
    for step in range(NEW_TOKENS):
        feeds = {
            "input_ids": np.asarray([ids if step == 0 else ids[-1:]], np.int32),
            **past,
            **cross,
        }
        got = dict(zip(names, dec.run(None, feeds), strict=True))
        tokens.append(int(got["logits"][0, -1].argmax()))
        ids.append(tokens[-1])
        past = {present[k]: v for k, v in got.items() if k in present}
    return tokens


def keep(src: Path, dest: Path, names: list[str]) -> None:
    log(f"{dest.name}: the exporter wrote {sorted(p.name for p in src.iterdir())}, keeping {names}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in names:
        shutil.copy2(src / name, dest / name)
        data = src / (name + "_data")  # optimum's external data, were there any
        if data.exists():
            shutil.copy2(data, dest / data.name)


# ------------------------------------------------------------------------- stage: verify


def model_file(folder: Path) -> Path:
    genai = folder / "genai_config.json"
    if genai.exists():
        return folder / json.loads(genai.read_text())["model"]["decoder"]["filename"]
    for name in ("decoder_model_merged.onnx", "model.onnx"):
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(folder)


def kv_dims(folder: Path) -> dict[str, int]:
    """KV heads and head size, from genai_config.json or config.json ({}: the inputs' fixed
    dims say them)."""
    genai = folder / "genai_config.json"
    if not genai.exists() and not (folder / "config.json").exists():
        return {}
    if genai.exists():
        d = json.loads(genai.read_text())["model"]["decoder"]
        window = d.get("sliding_window") or {}
        slots = window.get("window_size", 0) + window.get("cache_slack", 0)
        # the sliding-window layers' fixed buffer: window + slack slots from the first step on
        fixed = {f"past_key_values.{n}.": slots for n in window.get("layers", [])}
        return {"kv": d["num_key_value_heads"], "hs": d["head_size"], "fixed": fixed}
    c = json.loads((folder / "config.json").read_text())
    heads = c.get("num_attention_heads", c.get("n_head"))
    hidden = c.get("hidden_size", c.get("n_embd"))
    return {"kv": c.get("num_key_value_heads", heads), "hs": c.get("head_dim") or hidden // heads}


def feeds_for(sess, ids: list[int], past: dict, past_len: int, head: dict[str, int]) -> dict:
    """Feeds by role: ids [1, S], a mask of past + new, positions continuing the past."""
    import numpy as np

    dtypes = {
        "tensor(float)": np.float32,
        "tensor(float16)": np.float16,
        "tensor(int64)": np.int64,
        "tensor(int32)": np.int32,
        "tensor(bool)": np.bool_,
    }
    s = len(ids)
    feeds = {}
    for i in sess.get_inputs():
        dt = dtypes[i.type]
        if i.name == "input_ids":
            feeds[i.name] = np.array([ids], dtype=dt)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, past_len + s), dtype=dt)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(past_len, past_len + s, dtype=dt)[None, :]
        elif i.name == "use_cache_branch":
            feeds[i.name] = np.array([past_len > 0], dtype=dt)
        elif i.name.startswith("past_key_values.") and past:
            feeds[i.name] = past[i.name]
        elif i.name.startswith("past.") and past:  # a carried state (LFM2's conv)
            feeds[i.name] = past[i.name]
        elif i.name.startswith("past."):  # zero before the first step, its declared dims
            feeds[i.name] = np.zeros((1, *i.shape[1:]), dtype=dt)
        elif i.name.startswith("past_key_values."):
            # genai declares the head size as 'kv_cache_dim': read it from the config
            kv, hs = (
                d if isinstance(d, int) else head[k]
                for k, d in [("kv", i.shape[1]), ("hs", i.shape[3])]
            )
            slots = next((n for k, n in head.get("fixed", {}).items() if i.name.startswith(k)), 0)
            feeds[i.name] = np.zeros((1, kv, slots, hs), dtype=dt)
        else:
            raise KeyError(f"unexpected input {i.name}")
    return feeds


def ort_greedy(folder: Path) -> tuple:
    """Plain onnxruntime: prefill, then decode steps feeding present back as past."""
    import numpy as np
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_file(folder)), providers=["CPUExecutionProvider"])
    head = kv_dims(folder)
    names = [o.name for o in sess.get_outputs()]
    past: dict = {}
    past_len, ids, tokens, shapes, margin = 0, list(PROMPT), [], {}, float("inf")
    for step in range(NEW_TOKENS):
        feeds = feeds_for(sess, ids, past, past_len, head)
        outs = dict(zip(names, sess.run(None, feeds), strict=True))
        if step < 2:
            shapes["prefill" if step == 0 else "decode"] = {
                "inputs": {k: [list(v.shape), str(v.dtype)] for k, v in feeds.items()},
                "outputs": {k: [list(v.shape), str(v.dtype)] for k, v in outs.items()},
            }
        last = outs["logits"][0, -1]
        second, first = np.sort(last)[-2:]
        margin = min(margin, float(first - second))
        tokens.append(int(np.argmax(last)))
        past_len += len(ids)
        inputs = {i.name for i in sess.get_inputs()}
        past = {  # present.N.key -> past_key_values.N.key; present.N.conv -> past.N.conv
            next(
                n
                for n in (k.replace("present", "past_key_values"), k.replace("present", "past"))
                if n in inputs
            ): v
            for k, v in outs.items()
            if k != "logits"
        }
        ids = [tokens[-1]]
    return sess, tokens, shapes, margin


def genai_greedy(folder: Path) -> list[int]:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(PROMPT) + NEW_TOKENS)
    gen = og.Generator(model, params)
    gen.append_tokens(PROMPT)
    tokens = []
    while not gen.is_done():
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
    return tokens


def describe(folder: Path) -> dict:
    import onnx

    path = model_file(folder)
    m = onnx.load(str(path), load_external_data=False)
    info: dict = {
        "model": path.name,
        "opset": {o.domain or "ai.onnx": o.version for o in m.opset_import},
        "producer": f"{m.producer_name} {m.producer_version}".strip(),
        "ops": dict(Counter(n.op_type for n in m.graph.node).most_common()),
        "files": {p.name: p.stat().st_size for p in sorted(folder.iterdir())},
        "external_data": sorted(
            {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
        ),
        "outer_initializers": len(m.graph.initializer),
        "attributes": {},
    }
    for n in m.graph.node:
        if n.op_type in ("MatMulNBits", "GroupQueryAttention", "SkipSimplifiedLayerNormalization"):
            a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            a = {k: v.decode() if isinstance(v, bytes) else v for k, v in sorted(a.items())}
            variants = info["attributes"].setdefault(n.op_type, [])
            if a not in variants:
                variants.append(a)
        for a in n.attribute:
            if a.type != onnx.AttributeProto.GRAPH:
                continue
            names = Counter(x.name for x in a.g.node)
            info.setdefault("subgraphs", {})[f"{n.name}.{a.name}"] = {
                "op": n.op_type,
                "condition": n.input[0],
                "graph_name": a.g.name,
                "nodes": len(a.g.node),
                "initializers": len(a.g.initializer),
                "ops": dict(Counter(x.op_type for x in a.g.node).most_common()),
                "repeated_node_names": {k: c for k, c in names.items() if c > 1},
            }
    if "subgraphs" in info:
        branches = [
            {x.name for x in a.g.node} for n in m.graph.node for a in n.attribute if a.g.node
        ]
        info["node_names_in_both_branches"] = len(set.intersection(*branches))
    return info


def versions() -> dict:
    code = (
        "import json, importlib.metadata as m\nr = {}\n"
        f"for n in {VERSION_NAMES!r}:\n    try: r[n] = m.version(n)\n    except Exception: pass\n"
        "print(json.dumps(r))"
    )
    got = {}
    for venv in VENVS:
        py = cache_dir() / f"venv-{venv}" / "bin" / "python"
        done = subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=True)
        got[venv] = json.loads(done.stdout)
    return got


def stage_verify(args) -> None:
    out = Path(args.out)
    ref: dict = {
        "prompt": PROMPT,
        "new_tokens": NEW_TOKENS,
        "seed": SEED,
        "versions": versions(),
        "llama_config": LLAMA,
        "gpt2_config": GPT2,
        "gemma2_config": GEMMA2,
        "lfm2_config": LFM2,
        "gptoss_config": GPTOSS,
        "models": {},
    }
    problems = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        if (folder / "encoder_model.onnx").exists() or (folder / "multimodel.json").exists():
            continue  # an encoder-decoder: stage seq2seq or multimodel checked it (its json)
        info = describe(folder)
        sess, tokens, shapes, margin = ort_greedy(folder)
        info["inputs"] = [[i.name, i.type, i.shape] for i in sess.get_inputs()]
        info["outputs"] = [[o.name, o.type, o.shape] for o in sess.get_outputs()]
        info["feeds"] = shapes
        info["ort_greedy_tokens"] = tokens
        info["greedy_min_logit_margin"] = round(margin, 5)
        source = next(
            (s for f, (s, *_) in FAMILIES.items() if f == folder.name),
            "gpt2" if "gpt2" in folder.name else "llama",
        )
        torch_ref = cache_dir() / "hf" / source
        if "int4" not in folder.name:  # the same weights as the torch model: the same tokens
            info["torch_greedy_tokens"] = json.loads((torch_ref / "torch_greedy.json").read_text())
            if info["torch_greedy_tokens"] != tokens:
                problems.append(f"{folder.name}: torch {info['torch_greedy_tokens']} != {tokens}")
        if (folder / "genai_config.json").exists():
            info["genai_greedy_tokens"] = genai_greedy(folder)
            if info["genai_greedy_tokens"] != tokens:
                problems.append(f"{folder.name}: genai {info['genai_greedy_tokens']} != {tokens}")
        ref["models"][folder.name] = info
        log(f"verified {folder.name}: {tokens}")
    (out / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
    (out / "README.md").write_text(readme(ref))
    if problems:
        raise SystemExit("make_decoders: the greedy tokens disagree:\n" + "\n".join(problems))


# ------------------------------------------------------------------------- README


def fmt_ops(ops: dict, top: int = 99) -> str:
    return ", ".join(f"{k} {c}" for k, c in list(ops.items())[:top])


def fmt_io(items: list) -> str:
    return "; ".join(
        f"`{name}` {t.removeprefix('tensor(').rstrip(')')} {s}" for name, t, s in items
    )


def model_section(name: str, info: dict, ref: dict) -> list[str]:
    what, cmd = HOW.get(name, ("?", "?"))
    size = sum(info["files"].values())
    files = ", ".join(f"`{k}` ({s:,} B)" for k, s in info["files"].items())
    external = ", ".join(info["external_data"]) or "none"
    opsets = ", ".join(f"{k} {v}" for k, v in info["opset"].items())
    lines = [
        f"### `{name}/`: {size:,} bytes",
        "",
        f"- Exporter: {what}.",
        f"- Command: `{cmd}`",
        f"- Files: {files}",
        f"- `{info['model']}`: producer `{info['producer']}`, opsets {opsets},"
        f" external data: {external}",
        f"- Ops (outer graph): {fmt_ops(info['ops'])}",
    ]
    for op, variants in info["attributes"].items():
        shown = " | ".join(", ".join(f"{k}={v}" for k, v in a.items()) for a in variants)
        lines.append(f"- `{op}` attributes: {shown}")
    for key, sg in info.get("subgraphs", {}).items():
        rep = sg["repeated_node_names"]
        lines.append(
            f"- `{sg['op']}` on `{sg['condition']}`, body `{key}` (graph `{sg['graph_name']}`):"
            f" {sg['nodes']} nodes, {sg['initializers']} initializers,"
            f" {'repeated node names ' + str(rep) if rep else 'no node name repeated'};"
            f" ops {fmt_ops(sg['ops'], 12)}, ..."
        )
    if "subgraphs" in info:
        lines.append(
            f"- The outer graph holds the {info['outer_initializers']} weight initializers both"
            f" branches read; {info['node_names_in_both_branches']} node names occur in both"
            " branches (each branch's names are unique within it)"
        )
    lines += [
        f"- Inputs: {fmt_io(info['inputs'])}",
        f"- Outputs: {fmt_io(info['outputs'])}",
    ]
    for phase, sh in info["feeds"].items():
        feeds = ", ".join(f"`{k}` {v[1]} {v[0]}" for k, v in sh["inputs"].items())
        lines.append(f"- {phase.capitalize()} feeds plain onnxruntime ran: {feeds}")
    lines.append(
        f"- Greedy, plain onnxruntime loop, prompt {ref['prompt']}, {ref['new_tokens']} new tokens:"
        f" **{info['ort_greedy_tokens']}** (smallest top-1 minus top-2 logit on the way"
        f" {info['greedy_min_logit_margin']:g})"
    )
    if "torch_greedy_tokens" in info:
        same = "the same" if info["torch_greedy_tokens"] == info["ort_greedy_tokens"] else "OTHER"
        lines.append(
            f"- Torch greedy loop (its own KV cache) on the source checkpoint: {same} tokens"
        )
    if "genai_greedy_tokens" in info:
        same = "the same" if info["genai_greedy_tokens"] == info["ort_greedy_tokens"] else "OTHER"
        lines.append(
            "- onnxruntime-genai's generator (greedy, max_length"
            f" {len(ref['prompt']) + ref['new_tokens']}, from token ids): {same} tokens"
        )
    return [*lines, ""]


def readme(ref: dict) -> str:
    g, o = ref["versions"]["genai"], ref["versions"]["optimum"]
    llama, gpt2, gemma = ref["llama_config"], ref["gpt2_config"], ref["gemma2_config"]
    lfm2, gptoss = ref["lfm2_config"], ref["gptoss_config"]
    total = sum(sum(i["files"].values()) for i in ref["models"].values())
    lines = [
        "# Tiny LLM decoders made by the real exporters (issue 39)",
        "",
        "Made by `python3 scripts/make_decoders.py` (not run by CI: it builds its own venvs with",
        "torch and transformers outside the repository; its output is byte-reproducible). The",
        f"models are random-initialised from configs in code (torch seed {ref['seed']}, no hub",
        "download): the weights mean nothing, the graphs are what the exporters make of real",
        "checkpoints. `reference.json` holds all of this machine-readable (op counts, attributes,",
        "inputs and outputs, the feeds that ran, greedy tokens, versions).",
        "",
        f"Versions: onnxruntime-genai {g['onnxruntime-genai']}'s builder with transformers"
        f" {g['transformers']}, torch {g['torch']}, onnx {g['onnx']}, onnx-ir {g['onnx-ir']};"
        f" optimum {o['optimum']} + optimum-onnx {o['optimum-onnx']} with transformers"
        f" {o['transformers']}, torch {o['torch']}, accelerate {o.get('accelerate', '?')};"
        f" checked with onnxruntime {g['onnxruntime']}.",
        "",
        "## Source models",
        "",
        f"- **Llama** (`LlamaForCausalLM`; `genai_int4`, `genai_fp32` and `optimum_llama` carry the"
        f" same weights): {llama['num_hidden_layers']} layers, hidden {llama['hidden_size']},"
        f" {llama['num_attention_heads']} heads, {llama['num_key_value_heads']} KV heads (GQA),"
        f" head size {llama['head_dim']}, intermediate {llama['intermediate_size']}, vocab"
        f" {llama['vocab_size']}, max positions {llama['max_position_embeddings']}, rope theta"
        f" {llama['rope_theta']:g}, untied lm_head, bos {llama['bos_token_id']}, eos"
        f" {llama['eos_token_id']}, pad {llama['pad_token_id']}.",
        f"- **GPT-2** (`GPT2LMHeadModel`; `optimum_gpt2_merged`): {gpt2['n_layer']} layers, n_embd"
        f" {gpt2['n_embd']}, {gpt2['n_head']} heads (no GQA: KV heads = heads), head size"
        f" {gpt2['n_embd'] // gpt2['n_head']}, inner {gpt2['n_inner']}, vocab {gpt2['vocab_size']},"
        f" n_positions {gpt2['n_positions']}, lm_head tied to wte, bos {gpt2['bos_token_id']}, eos"
        f" {gpt2['eos_token_id']}.",
        f"- **Gemma 2** (`Gemma2ForCausalLM`; `genai_gemma2_int4`): {gemma['num_hidden_layers']}"
        f" layers alternating sliding-window ({gemma['sliding_window']} tokens) and global,"
        f" hidden {gemma['hidden_size']}, {gemma['num_attention_heads']} heads,"
        f" {gemma['num_key_value_heads']} KV heads, head size {gemma['head_dim']}, vocab"
        f" {gemma['vocab_size']}, max positions {gemma['max_position_embeddings']}, untied lm_head"
        " (a tied one repeats the last prompt token): genai's builder gives the sliding layers a"
        " fixed cache buffer of window slots from the first step on (GroupQueryAttention's"
        " `sliding_window_cache`; `past_sliding_length` in its inputs).",
        f"- **LFM2** (`Lfm2ForCausalLM`; `genai_lfm2_int4`): {lfm2['num_hidden_layers']} layers"
        f" ({', '.join(lfm2['layer_types'])}), hidden {lfm2['hidden_size']},"
        f" {lfm2['num_attention_heads']} heads, {lfm2['num_key_value_heads']} KV heads, conv"
        f" L_cache {lfm2['conv_L_cache']}, vocab {lfm2['vocab_size']}, untied lm_head: genai's"
        " builder carries each convolution layer's state as `past.N.conv` -> `present.N.conv`"
        " ([batch, hidden, L_cache - 1], CausalConvWithState) beside the attention layers' K/V.",
        f"- **gpt-oss** (`GptOssForCausalLM`; `genai_gptoss_fp32`): {gptoss['num_hidden_layers']}"
        f" layers (sliding window {gptoss['sliding_window']}, then global), hidden"
        f" {gptoss['hidden_size']}, {gptoss['num_local_experts']} experts of intermediate"
        f" {gptoss['intermediate_size']}, {gptoss['num_experts_per_tok']} per token (genai's `MoE`"
        " op), vocab 1000, untied lm_head; fp32, since genai's int4 path for gpt-oss reads the"
        " checkpoint's original MXFP4 tensors, which a config-built model has not.",
        "- All with initializer_range 0.2 (HF's 0.02 gives near-flat logits, and a GPT-2 that",
        "  repeats its last prompt token). A WordLevel tokenizer (`<unk>`, `<s>`, `</s>`,",
        "  `w3`..`w999`) made offline, because the genai builder insists on one; the genai folders",
        "  carry it, but tests should feed token ids.",
        "",
        "Feeds by role: `input_ids` [1, S]; `attention_mask` [1, P + S] ones, whatever length the",
        "export declares (the merged GPT-2 declares `sequence_length`, from its no-past half);",
        "`position_ids` [1, S] = P .. P+S-1 where the model has it; `past_key_values.N.key/value`",
        "[1, KV heads, P, head size] with P = 0 in prefill (genai declares the head size",
        "`kv_cache_dim`: read it from `genai_config.json`); `use_cache_branch` [1] bool = P > 0",
        "(the merged model still wants its past inputs in prefill, empty). Each `present.N.*`",
        "output is the next step's `past_key_values.N.*`.",
        "",
        f"## Folders ({total:,} bytes in all)",
        "",
    ]
    for name, info in ref["models"].items():
        lines += model_section(name, info, ref)
    lines += SEQ2SEQ_README
    return "\n".join(lines)


SEQ2SEQ_README = [
    "",
    "## Encoder-decoders (stage `seq2seq`)",
    "",
    "### `optimum_whisper/`",
    "",
    "- A tiny `WhisperForConditionalGeneration` (random weights, seed 0; 2 encoder and 2 decoder",
    "  layers, d_model 64, 4 heads, vocab 1000, 80 mel bins, 1500 encoder frames as Whisper's,",
    "  128 target positions, decoder start token 3) exported by optimum-onnx's `main_export(...,",
    "  task='automatic-speech-recognition-with-past')`; kept: `encoder_model.onnx`,",
    "  `decoder_model_merged.onnx` (an If on `use_cache_branch`), `config.json`,",
    "  `generation_config.json`.",
    "- The decoder's inputs: `input_ids`, `encoder_hidden_states` [1, 1500, 64],",
    "  `past_key_values.N.decoder.key/value` (self-attention: grows a token a step) and",
    "  `past_key_values.N.encoder.key/value` (cross-attention: empty in the first step, whose",
    "  present computes it from the encoder's states; then the first step's fed back fixed: the",
    "  with-past branch returns a dummy in its place), `use_cache_branch`.",
    "- `seq2seq.json`: optimum's own `ORTModelForSpeechSeq2Seq.generate` on the folder (greedy,",
    "  16 new tokens, input features `default_rng(0).standard_normal((1, 80, 3000))`) and a plain",
    "  onnxruntime loop, which agree; not in `reference.json` (the verify stage reads",
    "  decoder-only folders).",
    "",
    "### `optimum_t5/`",
    "",
    "- A tiny `T5ForConditionalGeneration` (random weights, seed 0, initializer_factor 20: the",
    "  default init makes a tiny T5 repeat its pad id; 2 + 2 layers, d_model 64, 4 heads x 16,",
    "  vocab 1000, 8 relative-position buckets, decoder start token 0) exported by",
    "  `main_export(..., task='text2text-generation-with-past')`; kept as Whisper's.",
    "- The decoder also reads `encoder_attention_mask` [batch, source length] (the encoder's",
    "  `attention_mask`).",
    "- `seq2seq.json`: optimum's `ORTModelForSeq2SeqLM.generate` (greedy, 16 new tokens, source",
    "  ids `default_rng(0).integers(2, 1000, (1, 12))`, a mask of ones) and a plain onnxruntime",
    "  loop, which agree.",
    "",
    "### `genai_whisper/` (stage `multimodel`)",
    "",
    "- The same tiny Whisper config (seed 0, in the genai venv's transformers; every bias drawn",
    "  from N(0, 0.2): genai's builder drops a zero bias, and onnxruntime 1.31.1's CPU",
    "  `com.microsoft.Attention` without its bias input crashes the process) through",
    "  onnxruntime-genai's builder, `-p fp32 -e cpu`: a folder of two models named by",
    "  `genai_config.json` (type `whisper`): `encoder.onnx` (`audio_features` [batch, 80, 3000]",
    "  in; `hidden_states` and each layer's `present_key_cross_N` / `present_value_cross_N` out)",
    "  and `decoder.onnx` (`input_ids` int32, `past_key_self_N` growing, `past_key_cross_N` read",
    "  from the encoder), with its tokenizer and `audio_processor_config.json`.",
    "- `multimodel.json`: onnxruntime-genai's generator (greedy, 16 new tokens after start id 3,",
    "  `audio_features` given as a tensor: `default_rng(0).standard_normal((1, 80, 3000))`) and",
    "  a plain onnxruntime loop over the two files, which agree.",
    "",
]
"""The encoder-decoder folder's section of README.md (its facts are seq2seq.json's)."""


# ------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", default=str(OUT_DEFAULT), help="where the model folders go")
    ap.add_argument("--only", nargs="*", choices=list(STAGE_VENV), help="run only these stages")
    ap.add_argument("--stage", choices=list(STAGE_VENV), help=argparse.SUPPRESS)
    args = ap.parse_args()
    stages = {
        "hf": stage_hf,
        "genai": stage_genai,
        "optimum": stage_optimum,
        "dynamo": stage_dynamo,
        "seq2seq": stage_seq2seq,
        "corpus": stage_corpus,
        "families": stage_families,
        "multimodel": stage_multimodel,
        "verify": stage_verify,
    }
    if args.stage:
        stages[args.stage](args)
    else:
        outer(args)


if __name__ == "__main__":
    main()
