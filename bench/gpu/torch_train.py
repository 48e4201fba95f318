#!/usr/bin/env python3
"""PyTorch's side of the GPU table (bench/gpu/run.sh): the cuBLAS GEMM ceiling,
the device-to-device copy rate, MLP / CNN training samples/s in eager mode
and under torch.compile, on the same models, batch and optimizer as bench_gpu,
mixed precision's anchor (issue 10): bench_gpu's transformer block and the
CNN at batch 4,096, eager, f32 with TF32 off against torch.autocast bf16, and
the ratio; and issue 28's attention anchor: F.scaled_dot_product_attention
forward + backward, causal, bf16, at bench_gpu's shapes.

Prints Markdown table rows `| what | figure | against |`. Timing: warm-up, then
a timed loop between synchronize() calls; inputs are random, never
zeros, and resident on the GPU (the input pipeline is not measured here).
  python3 bench/gpu/torch_train.py [--no-compile]
NIMBUS_TORCH_DEVICE=cpu runs the MLP / CNN training rows on the CPU (a smoke test of this script);
the mixed-precision rows, at the GPU's sizes, run on CUDA only.
"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = os.environ.get("NIMBUS_TORCH_DEVICE", "cuda")


def synchronize():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def seconds_per_call(work, calls, warmup=3):
    for _ in range(warmup):
        work()
    synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        work()
    synchronize()
    return (time.perf_counter() - start) / calls


def row(what, figure, against=""):
    print(f"| {what} | {figure} | {against} |", flush=True)


def gemm(n, dtype, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device=DEVICE, dtype=dtype)
    b = torch.randn(n, n, device=DEVICE, dtype=dtype)
    s = seconds_per_call(lambda: a @ b, 20)
    name = "tf32" if tf32 else {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}[dtype]
    row(f"PyTorch GEMM {n}³ {name} (cuBLAS)", f"{2.0 * n ** 3 / s / 1e12:.1f} TFLOP/s", "the ceiling for ours")
    torch.backends.cuda.matmul.allow_tf32 = False


def copy_rate(n):
    x = torch.randn(n, device=DEVICE)
    y = torch.empty_like(x)
    s = seconds_per_call(lambda: y.copy_(x), 50)
    row("PyTorch device-to-device copy", f"{2.0 * 4 * n / s / 1e9:.1f} GB/s", "bytes read + written")


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnn():
    # Channels-first in PyTorch; the same layers as bench_gpu's NHWC CNN.
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def train_rate(name, make_model, compiled, batch=256, steps=200):
    torch.manual_seed(0)
    model = make_model().to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(batch, 1, 28, 28, device=DEVICE)
    y = torch.randint(0, 10, (batch,), device=DEVICE)
    forward = torch.compile(model) if compiled else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(forward(x), y)
        loss.backward()
        optimizer.step()

    started = time.perf_counter()
    step()  # the first step compiles under torch.compile
    synchronize()
    first = time.perf_counter() - started
    s = seconds_per_call(step, steps, warmup=20)
    mode = "torch.compile" if compiled else "eager"
    row(f"PyTorch {name} training, batch {batch}, Adam ({mode})", f"{batch / s:,.0f} samples/s",
        f"{s * 1e3:.3f} ms/step; first step {first:.1f} s")


class TransformerBlock(nn.Module):
    """bench_gpu's block (tests/support/policy_step_models.h): pre-LN, self-attention over the whole
    sequence (no causal mask), GELU feed-forward, Keras's LayerNormalization epsilon. attention="math"
    writes it out as Nimbus runs it (projections, scores, softmax, weighted values); "sdpa" is PyTorch's
    fused F.scaled_dot_product_attention (flash attention under bf16)."""

    def __init__(self, attention, d_model=1024, heads=16, feed_forward=4096):
        super().__init__()
        self.attention, self.heads = attention, heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model, eps=1e-3), nn.LayerNorm(d_model, eps=1e-3)
        self.query, self.key, self.value = (nn.Linear(d_model, d_model) for _ in range(3))
        self.output = nn.Linear(d_model, d_model)
        self.up, self.down = nn.Linear(d_model, feed_forward), nn.Linear(feed_forward, d_model)

    def forward(self, x):
        n, t, d = x.shape
        normed = self.norm1(x)
        q, k, v = (p(normed).view(n, t, self.heads, d // self.heads).transpose(1, 2)
                   for p in (self.query, self.key, self.value))
        if self.attention == "sdpa":
            heads = F.scaled_dot_product_attention(q, k, v)
        else:
            heads = torch.softmax((q * (d // self.heads) ** -0.5) @ k.transpose(-1, -2), dim=-1) @ v
        h = x + self.output(heads.transpose(1, 2).reshape(n, t, d))
        return h + self.down(F.gelu(self.up(self.norm2(h))))


def step_rate(make_model, x, y, loss_fn, dtype, steps):
    """Seconds per eager training step (Adam), under torch.autocast to `dtype` unless it is None."""
    torch.manual_seed(0)
    model = make_model().to(DEVICE)
    if x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)  # NHWC, as Nimbus's CNN
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(DEVICE, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    return seconds_per_call(step, steps)


def mixed_precision_speedup(name, make_model, x, y, loss_fn, steps=20, per_sample=""):
    """Step throughput of one model in f32 (TF32 off in cuBLAS and cuDNN) and under torch.autocast bf16
    (f32 weights and Adam; matmuls and convolutions in bf16, softmax and layer norm in f32), then the ratio."""
    cudnn_tf32 = torch.backends.cudnn.allow_tf32  # on by default: the other rows keep PyTorch's defaults
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    batch = x.shape[0]
    rates = []
    try:
        for label, dtype in (("f32, no TF32", None), ("autocast bf16", torch.bfloat16)):
            s = step_rate(make_model, x, y, loss_fn, dtype, steps)
            rates.append(batch / s)
            extra = f"; {batch * x.shape[1] / s:,.0f} {per_sample}/s" if per_sample else ""
            row(f"PyTorch {name}, batch {batch}, Adam, eager, {label}", f"{batch / s:,.1f} samples/s",
                f"{s * 1e3:.2f} ms/step{extra}")
    finally:
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
    row(f"PyTorch {name}: autocast bf16 / f32 step throughput", f"{rates[1] / rates[0]:.2f}×",
        "the anchor for bench_gpu's ratio (goal ≥ 2.5×)")


def mixed_precision_rows():
    shape = (16, 512, 1024)
    x, target = torch.randn(shape, device=DEVICE), torch.randn(shape, device=DEVICE)
    for attention in ("math", "sdpa"):
        mixed_precision_speedup(f"transformer block (pre-LN, d_model 1024, 16 heads, sequence 512), {attention} attention",
                                lambda: TransformerBlock(attention), x, target, F.mse_loss, per_sample="tokens")
    images = torch.rand(4096, 1, 28, 28, device=DEVICE).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (4096,), device=DEVICE)
    mixed_precision_speedup("CNN", cnn, images, labels, nn.CrossEntropyLoss())


def attention_rate(sequence, batch=8, heads=16, head_size=64):
    """F.scaled_dot_product_attention forward + backward (gradients of q, k and v), causal, bf16, in ms and in
    TFLOP/s of FlashAttention's count for a causal step: 3.5 x the forward's 2 x 2 x B x H x T^2 x D / 2."""
    shape = (batch, heads, sequence, head_size)
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(shape, device=DEVICE, dtype=torch.bfloat16)

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.autograd.grad(out, (q, k, v), grad_out)

    s = seconds_per_call(step, 20)
    flops = 3.5 * 2 * 2 * batch * heads * sequence * sequence * head_size / 2
    row(f"PyTorch scaled_dot_product_attention forward + backward, causal bf16, B {batch} H {heads} T {sequence} "
        f"D {head_size}", f"{s * 1e3:.3f} ms", f"{flops / s / 1e12:.1f} TFLOP/s")


def main():
    if DEVICE == "cuda":
        if not torch.cuda.is_available():
            print("torch_train.py: PyTorch sees no CUDA device", file=sys.stderr)
            return 2
        row("PyTorch", torch.__version__, torch.cuda.get_device_name(0))
        copy_rate(1 << 26)
        gemm(4096, torch.float32)
        gemm(4096, torch.float32, tf32=True)
        gemm(4096, torch.bfloat16)
        gemm(8192, torch.bfloat16)
        for sequence in (1024, 4096):
            attention_rate(sequence)
        try:  # before torch.compile's rows, which may use up run.sh's time limit
            mixed_precision_rows()
        except Exception as error:  # keep the rows printed so far
            row("PyTorch mixed-precision rows", "failed", str(error).splitlines()[0][:120])
    for compiled in (False, True):
        if compiled and "--no-compile" in sys.argv:
            continue
        for name, make in (("MLP", mlp), ("CNN", cnn)):
            try:
                train_rate(name, make, compiled)
            except Exception as error:  # a failed compile must not lose the other rows
                row(f"PyTorch {name} ({'torch.compile' if compiled else 'eager'})", "failed",
                    str(error).splitlines()[0][:120])
    return 0


if __name__ == "__main__":
    sys.exit(main())
