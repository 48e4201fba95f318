#!/usr/bin/env python3
"""Eager per-call cost of Nimbus against PyTorch 1.13 from Python, in one process, interleaved.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/eager_overhead.py [ROUNDS]   # default 7

Two calls, each timed per round on both sides in alternating order so that both see the machine's
load alike: ``a + b`` of two float32 tensors of 16 elements, and ``matmul`` of two 64x64 float32
matrices. One thread on both sides (OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1, set here before
either library loads; torch.set_num_threads(1)), OMP_WAIT_POLICY=passive. Prints the per-call
microseconds of every round, then the medians with their range and the median of the per-round
ratios Nimbus / PyTorch (the must-hold of issue 22: at most 1 for both calls; docs/performance.md).
PyTorch's matmul speed depends on its BLAS: the script prints which one it loaded, and OpenBLAS's
core (OPENBLAS_CORETYPE selects another).
"""
import os

for variable, value in (("OMP_NUM_THREADS", "1"), ("OPENBLAS_NUM_THREADS", "1"), ("OMP_WAIT_POLICY", "passive")):
    os.environ[variable] = value

import ctypes  # noqa: E402  (after the thread settings, which the libraries read as they load)
import statistics  # noqa: E402
import sys  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import nimbus  # noqa: E402


def blas_of_torch():
    """The BLAS library torch loaded, and OpenBLAS's core when it is OpenBLAS."""
    with open("/proc/self/maps", encoding="ascii") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    for path in sorted(paths):
        library = ctypes.CDLL(path)
        if hasattr(library, "openblas_get_corename"):
            library.openblas_get_corename.restype = ctypes.c_char_p
            return f"OpenBLAS {path}, core {library.openblas_get_corename().decode()}"
    return f"not OpenBLAS: {', '.join(sorted(paths)) or 'none loaded'} (install libopenblas0-pthread)"


def per_call_us(call, calls):
    """Microseconds per call: the best of 3 runs of `calls` calls."""
    return min(timeit.repeat(call, number=calls, repeat=3)) / calls * 1e6


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
    print(f"torch BLAS_INFO: {[part for part in torch.__config__.show().split(', ') if 'BLAS_INFO' in part]}")
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    times = {(case, side): [] for case in cases for side in ("nimbus", "torch")}
    for round_index in range(rounds):
        for case, (nimbus_call, torch_call, calls) in cases.items():
            # Alternate which side goes first, so neither always runs on a warmer (or busier) machine.
            sides = [("nimbus", nimbus_call), ("torch", torch_call)]
            for side, call in sides if round_index % 2 == 0 else reversed(sides):
                times[case, side].append(per_call_us(call, calls))
            print(f"round {round_index + 1}  {case:<22} nimbus {times[case, 'nimbus'][-1]:8.2f} us  "
                  f"torch {times[case, 'torch'][-1]:8.2f} us  (load {os.getloadavg()[0]:.1f})")
    print(f"\n{'call':<22} {'nimbus us (range)':>24} {'torch us (range)':>24} {'ratio (range)':>20}")
    for case in cases:
        ours, theirs = times[case, "nimbus"], times[case, "torch"]
        ratios = [o / t for o, t in zip(ours, theirs)]
        print(f"{case:<22} {statistics.median(ours):8.2f} ({min(ours):.2f}-{max(ours):.2f}) "
              f"{statistics.median(theirs):10.2f} ({min(theirs):.2f}-{max(theirs):.2f}) "
              f"{statistics.median(ratios):8.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
