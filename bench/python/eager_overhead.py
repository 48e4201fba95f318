#!/usr/bin/env python3
"""Eager per-call cost of Nimbus against PyTorch 1.13 from Python, in one process, interleaved.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/eager_overhead.py [ROUNDS]   # default 7

Two calls, each timed per round on both sides in alternating order so that both see the machine's
load alike: ``a + b`` of two float32 tensors of 16 elements, and ``matmul`` of two 64x64 float32
matrices. One thread on both sides (OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1, set here before
either library loads; torch.set_num_threads(1)), OMP_WAIT_POLICY=passive. Prints the per-call
microseconds of every round, by the wall clock and by the process's CPU time, then the medians with
their range and the median of the per-round ratios Nimbus / PyTorch (the must-hold of issue 22: at
most 1 for both calls; docs/performance.md).
PyTorch's matmul speed depends on its BLAS: the script prints which one it loaded, and OpenBLAS's
core (OPENBLAS_CORETYPE selects another).
"""
import os

for variable, value in (("OMP_NUM_THREADS", "1"), ("OPENBLAS_NUM_THREADS", "1"), ("OMP_WAIT_POLICY", "passive")):
    os.environ[variable] = value

import re  # noqa: E402  (after the thread settings, which the libraries read as they load)
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import nimbus  # noqa: E402
from torch_blas import blas_of_torch  # noqa: E402


def per_call_us(call, calls):
    """Microseconds per call, the best of 3 runs of `calls` calls: (wall clock, this process's CPU time).

    The CPU time leaves out the time other processes held the core, so it stays put on a loaded
    machine where the wall clock does not."""
    best_wall = best_cpu = float("inf")
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            call()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall / calls * 1e6, best_cpu / calls * 1e6


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    vector_a, vector_b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    matrix_a, matrix_b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    nimbus_va, nimbus_vb = nimbus.constant(vector_a), nimbus.constant(vector_b)
    nimbus_ma, nimbus_mb = nimbus.constant(matrix_a), nimbus.constant(matrix_b)
    torch_va, torch_vb = torch.from_numpy(vector_a), torch.from_numpy(vector_b)
    torch_ma, torch_mb = torch.from_numpy(matrix_a), torch.from_numpy(matrix_b)
    # Both sides compute the same thing.
    np.testing.assert_allclose((nimbus_va + nimbus_vb).numpy(), (torch_va + torch_vb).numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(nimbus.matmul(nimbus_ma, nimbus_mb).numpy(), torch.matmul(torch_ma, torch_mb).numpy(),
                               rtol=1e-5, atol=1e-4)

    cases = {
        "a + b, 16 float32": (lambda: nimbus_va + nimbus_vb, lambda: torch_va + torch_vb, 20000),
        "matmul 64x64 float32": (lambda: nimbus.matmul(nimbus_ma, nimbus_mb), lambda: torch.matmul(torch_ma, torch_mb),
                                 2000),
    }
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; BLAS: {blas_of_torch()}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    settings = re.findall(r"(?:BLAS_INFO|LAPACK_INFO|USE_MKLDNN|USE_OPENMP)=\w+", torch.__config__.show())
    print(f"torch.__config__.show(): {', '.join(settings)}")
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    times = {(case, side, clock): [] for case in cases for side in ("nimbus", "torch") for clock in ("wall", "cpu")}
    for round_index in range(rounds):
        for case, (nimbus_call, torch_call, calls) in cases.items():
            # Alternate which side goes first, so neither always runs on a warmer (or busier) machine.
            sides = [("nimbus", nimbus_call), ("torch", torch_call)]
            for side, call in sides if round_index % 2 == 0 else reversed(sides):
                wall, cpu = per_call_us(call, calls)
                times[case, side, "wall"].append(wall)
                times[case, side, "cpu"].append(cpu)
            print(f"round {round_index + 1}  {case:<22} us per call, wall (cpu): "
                  f"nimbus {times[case, 'nimbus', 'wall'][-1]:7.2f} ({times[case, 'nimbus', 'cpu'][-1]:.2f})  "
                  f"torch {times[case, 'torch', 'wall'][-1]:7.2f} ({times[case, 'torch', 'cpu'][-1]:.2f})  "
                  f"load {os.getloadavg()[0]:.1f}")
    print(f"\n{'call':<22} {'clock':<5} {'nimbus us (range)':>22} {'torch us (range)':>22} {'nimbus/torch (range)':>22}")
    for case in cases:
        for clock in ("wall", "cpu"):
            ours, theirs = times[case, "nimbus", clock], times[case, "torch", clock]
            ratios = [o / t for o, t in zip(ours, theirs)]
            print(f"{case:<22} {clock:<5} {statistics.median(ours):8.2f} ({min(ours):.2f}-{max(ours):.2f}) "
                  f"{statistics.median(theirs):8.2f} ({min(theirs):.2f}-{max(theirs):.2f}) "
                  f"{statistics.median(ratios):8.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
