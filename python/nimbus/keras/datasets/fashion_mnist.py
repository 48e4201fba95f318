"""``nimbus.keras.datasets.fashion_mnist``: Fashion-MNIST from Debian's dataset-fashion-mnist package.

``load_data()`` returns what Keras's returns, ((x_train, y_train), (x_test, y_test)):
uint8 images (60000, 28, 28) and (10000, 28, 28), uint8 labels (60000,) and
(10000,), read from the package's IDX files instead of downloaded.
"""
import gzip
import os

import numpy as np

# Where Debian's dataset-fashion-mnist installs the IDX files.
DATA_DIR = "/usr/share/datasets/fashion-mnist"

_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049


def _read_idx(path, magic, rank):
    """The array of a gzipped IDX file of unsigned bytes (magic 2051 images, 2049 labels)."""
    with gzip.open(path, "rb") as file:
        data = file.read()
    header = 4 * (1 + rank)
    if len(data) < header or int.from_bytes(data[:4], "big") != magic:
        raise ValueError(f"{path}: not an IDX file of magic {magic}")
    dims = tuple(int.from_bytes(data[4 * (1 + i):4 * (2 + i)], "big") for i in range(rank))
    if len(data) - header != int(np.prod(dims)):
        raise ValueError(f"{path}: {len(data) - header} bytes of data, the header says {dims}")
    return np.frombuffer(data, np.uint8, offset=header).reshape(dims).copy()  # writable, as Keras gives


def load_data():
    """((x_train, y_train), (x_test, y_test)) as uint8 NumPy arrays, as keras.datasets.fashion_mnist gives."""
    files = {part: os.path.join(DATA_DIR, f"{part}.gz") for part in (
        "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
    missing = [path for path in files.values() if not os.path.exists(path)]
    if missing:
        raise FileNotFoundError(f"Fashion-MNIST is not installed: {', '.join(missing)} missing. Nimbus reads it "
                                "from Debian's package (it downloads nothing): apt-get install dataset-fashion-mnist")
    x_train = _read_idx(files["train-images-idx3-ubyte"], _IMAGES_MAGIC, 3)
    y_train = _read_idx(files["train-labels-idx1-ubyte"], _LABELS_MAGIC, 1)
    x_test = _read_idx(files["t10k-images-idx3-ubyte"], _IMAGES_MAGIC, 3)
    y_test = _read_idx(files["t10k-labels-idx1-ubyte"], _LABELS_MAGIC, 1)
    return (x_train, y_train), (x_test, y_test)
