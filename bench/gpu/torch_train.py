#!/usr/bin/env python3
"""PyTorch's side of the GPU table (bench/gpu/run.sh): the cuBLAS GEMM ceiling,
the device-to-device copy rate, and MLP / CNN training samples/s in eager mode
and under torch.compile, on the same models, batch and optimizer as bench_gpu.

Prints Markdown table rows `| what | figure | against |`. Timing: warm-up, then
a timed loop between synchronize() calls; inputs are random, never
zeros, and resident on the GPU (the input pipeline is not measured here).
  python3 bench/gpu/torch_train.py [--no-compile]
NIMBUS_TORCH_DEVICE=cpu runs the training rows on the CPU (a smoke test of this script).
"""
import os
import sys
import time

import torch
import torch.nn as nn

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
