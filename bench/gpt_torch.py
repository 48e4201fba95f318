#!/usr/bin/python3
"""The small GPT of bench/bench_gpt.cc written the usual PyTorch way, for bench/gpt_vs_torch.sh.

nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, dropout=0.0, activation="gelu",
batch_first=True, norm_first=True) x 2 in an nn.TransformerEncoder with a causal float mask,
nn.Embedding for tokens and learned positions, a final nn.LayerNorm and an nn.Linear head over 256 bytes;
context 128, batch 32, AdamW 3e-4, next-byte cross-entropy on random windows of the same byte text.
Prints one line "step_tokens_per_s X" per timed step, after WARMUP untimed ones.

    /usr/bin/python3 bench/gpt_torch.py TEXT_FILE [STEPS] [WARMUP]
"""

import ctypes
import os
import random
import sys
import time

import torch
from torch import nn

CONTEXT, VOCABULARY, MODEL, HEADS, FEED_FORWARD, LAYERS, BATCH = 128, 256, 128, 4, 512, 2, 32


class SmallGpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCABULARY, MODEL)
        self.positions = nn.Embedding(CONTEXT, MODEL)
        layer = nn.TransformerEncoderLayer(d_model=MODEL, nhead=HEADS, dim_feedforward=FEED_FORWARD, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=LAYERS)
        self.norm = nn.LayerNorm(MODEL)
        self.head = nn.Linear(MODEL, VOCABULARY)
        self.register_buffer("causal", torch.full((CONTEXT, CONTEXT), float("-inf")).triu(1))

    def forward(self, x):
        h = self.tokens(x) + self.positions(torch.arange(x.shape[1]))
        return self.head(self.norm(self.blocks(h, mask=self.causal)))


def blas_core():
    try:
        core = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
        core.restype = ctypes.c_char_p
        return core().decode()
    except OSError:
        return "unknown (no libopenblas.so.0)"


def main():
    text = open(sys.argv[1], "rb").read()
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    torch.set_num_threads(2)
    torch.manual_seed(1)
    rng = random.Random(1)
    model = SmallGpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()

    def batch():
        starts = [rng.randrange(len(text) - CONTEXT - 1) for _ in range(BATCH)]
        window = torch.tensor([list(text[s:s + CONTEXT + 1]) for s in starts], dtype=torch.long)
        return window[:, :-1], window[:, 1:]

    def step():
        x, y = batch()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x).reshape(-1, VOCABULARY), y.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(warmup):
        step()
    for _ in range(steps):
        begin = time.perf_counter()
        loss = step()
        print(f"step_tokens_per_s {BATCH * CONTEXT / (time.perf_counter() - begin):.1f}")
    print(f"pytorch small GPT: loss {loss:.3f} after {warmup + steps} steps; torch {torch.__version__}, "
          f"OpenBLAS core {blas_core()}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'default')}")


if __name__ == "__main__":
    main()
