"""Fashion-MNIST as keras.datasets.fashion_mnist.load_data() returns it, read from Debian's
dataset-fashion-mnist IDX files (tests skip when the package is missing)."""
import gzip
import os

import numpy as np
import pytest

FOLDER = "/usr/share/datasets/fashion-mnist"


def _idx(name, offset):
    with gzip.open(os.path.join(FOLDER, name)) as file:
        return np.frombuffer(file.read(), np.uint8, offset=offset)


def load_data():
    if not os.path.isdir(FOLDER):
        pytest.skip(f"{FOLDER} is missing (Debian's dataset-fashion-mnist)")
    x_train = _idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    y_train = _idx("train-labels-idx1-ubyte.gz", 8)
    x_test = _idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    y_test = _idx("t10k-labels-idx1-ubyte.gz", 8)
    return (x_train, y_train), (x_test, y_test)
