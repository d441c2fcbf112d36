"""Build tests/data/unet_tiny_diffusers.onnx: a diffusers UNet2DConditionModel exported with
torch.onnx.export (the TorchScript exporter, as optimum's Stable Diffusion export runs it), its
inputs named and dynamic as there: sample [batch_size, 4, height, width], timestep [steps],
encoder_hidden_states [batch_size, sequence_length, 32]. Random weights (seed 0), shrunk as
diffusers' own tiny test UNets are, so it is committed small; the export is checked against
torch at two shapes before it is written.

Why it exists: the timestep's dim has its own name ('steps'), which a guess by name takes for a
sequence (128), and plain onnxruntime then broadcasts 128 timesteps against a batch of 1; at a
guessed 224 x 224 latent its self-attention asks ORT's arena for terabytes (issue 61, item 1).

Run with a Python that has torch, diffusers and onnxruntime (not ortlab's venv), e.g.:
    python3 -m venv /tmp/unet && /tmp/unet/bin/pip install torch diffusers==0.42.1 \
        transformers onnx onnxruntime
    /tmp/unet/bin/python scripts/make_unet.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "unet_tiny_diffusers.onnx"
SEED = 0


def build() -> object:
    import torch
    from diffusers import UNet2DConditionModel

    torch.manual_seed(SEED)
    unet = UNet2DConditionModel(
        sample_size=32,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        norm_num_groups=8,
        cross_attention_dim=32,
        attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    ).eval()

    class Unet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.u = unet

        def forward(self, sample, timestep, encoder_hidden_states):  # type: ignore[no-untyped-def]
            return self.u(sample, timestep, encoder_hidden_states, return_dict=False)[0]

    return Unet().eval()


def main() -> int:
    import onnxruntime as ort
    import torch

    m = build()
    rng = np.random.default_rng(SEED)
    x = torch.from_numpy(rng.standard_normal((1, 4, 32, 32)).astype(np.float32))
    t = torch.tensor([981], dtype=torch.int64)
    h = torch.from_numpy(rng.standard_normal((1, 16, 32)).astype(np.float32))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        m,
        (x, t, h),
        str(OUT),
        dynamo=False,
        opset_version=17,
        input_names=["sample", "timestep", "encoder_hidden_states"],
        output_names=["out_sample"],
        dynamic_axes={
            "sample": {0: "batch_size", 2: "height", 3: "width"},
            "timestep": {0: "steps"},
            "encoder_hidden_states": {0: "batch_size", 1: "sequence_length"},
            "out_sample": {0: "batch_size", 2: "height", 3: "width"},
        },
    )
    sess = ort.InferenceSession(str(OUT), providers=["CPUExecutionProvider"])
    for batch, side, tokens in ((1, 32, 16), (2, 48, 77)):
        x = torch.from_numpy(rng.standard_normal((batch, 4, side, side)).astype(np.float32))
        h = torch.from_numpy(rng.standard_normal((batch, tokens, 32)).astype(np.float32))
        t = torch.tensor([501] * batch, dtype=torch.int64)
        with torch.no_grad():
            want = m(x, t, h).numpy()
        feeds = {"sample": x.numpy(), "timestep": t.numpy(), "encoder_hidden_states": h.numpy()}
        got = sess.run(None, feeds)[0]
        err = float(np.abs(got - want).max())
        print(f"{batch}x4x{side}x{side}, {tokens} tokens: max |onnx - torch| = {err:.2e}")
        if err > 1e-4:
            OUT.unlink()
            return 1
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
