#!/usr/bin/python3
"""PyTorch's attention for tests/core/attention_test.cc (AttentionVsTorch).

Usage: /usr/bin/python3 tests/core/attention_torch_reference.py DIR

Each folder under DIR holds one case written by the test: q.npy, k.npy, v.npy (B, H, T, D),
grad_out.npy, an optional mask.npy (B, 1, T, T), and attrs.txt ("causal SCALE" or "masked
SCALE"). For each, this computes softmax(q kᵀ · scale + mask) v the way PyTorch 1.13 code
writes it out in torch ops (Debian's torch has no scaled_dot_product_attention), in float64,
and the gradients of sum(out * grad_out) with respect to q, k and v; it writes them as raw
little-endian float64 files out.f64, grad_q.f64, grad_k.f64 and grad_v.f64.
"""

import pathlib
import sys

import numpy as np
import torch


def attention(q, k, v, scale, mask, causal):
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores + mask
    if causal:
        t, s = scores.shape[-2:]
        allowed = torch.ones(t, s, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def run_case(folder):
    load = lambda name: torch.from_numpy(np.load(folder / f"{name}.npy").astype(np.float64))
    mode, scale = (folder / "attrs.txt").read_text().split()
    q, k, v = (load(name).requires_grad_() for name in ("q", "k", "v"))
    mask = load("mask") if (folder / "mask.npy").exists() else None
    out = attention(q, k, v, float(scale), mask, mode == "causal")
    out.backward(load("grad_out"))
    for name, tensor in (("out", out), ("grad_q", q.grad), ("grad_k", k.grad), ("grad_v", v.grad)):
        tensor.detach().numpy().astype("<f8").tofile(folder / f"{name}.f64")


def main():
    root = pathlib.Path(sys.argv[1])
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        run_case(folder)
    print(f"torch {torch.__version__}: {sum(1 for p in root.iterdir() if p.is_dir())} cases")


if __name__ == "__main__":
    main()
