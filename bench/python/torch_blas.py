"""Which BLAS PyTorch multiplies matrices with, and OpenBLAS's core when it is OpenBLAS.

A side-by-side figure against PyTorch counts only with its kernel known: Debian's OpenBLAS picks its
core from the CPU, and OPENBLAS_CORETYPE overrides it.

    /usr/bin/python3 bench/python/torch_blas.py     # prints the line for the environment it runs in
"""
import ctypes


def blas_of_torch():
    """The BLAS library torch loaded, and OpenBLAS's core when it is OpenBLAS (call after importing torch)."""
    with open("/proc/self/maps", encoding="ascii") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    for path in sorted(paths):
        library = ctypes.CDLL(path)
        if hasattr(library, "openblas_get_corename"):
            library.openblas_get_corename.restype = ctypes.c_char_p
            return f"OpenBLAS {path}, core {library.openblas_get_corename().decode()}"
    return f"not OpenBLAS: {', '.join(sorted(paths)) or 'none loaded'} (install libopenblas0-pthread)"


if __name__ == "__main__":
    import torch

    torch.ones(2, 2) @ torch.ones(2, 2)  # loads the BLAS
    print(f"torch {torch.__version__}; BLAS: {blas_of_torch()}")
