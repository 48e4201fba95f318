"""``nimbus.io``: TensorFlow's tf.io for input pipelines: tf.train.Example parsing and raw decoding.

These are the data pipeline's ops (include/nimbus/data/example.h, decode.h). Called on tensors with
values they run at once; inside a function that ``Dataset.map`` traces they are recorded as steps of
the traced program and run on the pipeline's threads (python/src/data_ops.cc).
"""
import collections

import numpy as np

from nimbus import _nimbus, nest
from nimbus._nimbus import DType
from nimbus.errors import InvalidArgumentError
from nimbus.image import decode_and_crop_jpeg, decode_image, decode_jpeg, decode_png  # noqa: F401 (tf.io's too)

FixedLenFeature = collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"],
                                         defaults=[None])
FixedLenFeature.__doc__ = "A feature of a fixed shape (``tf.io.FixedLenFeature``): float32, int64 or string."
VarLenFeature = collections.namedtuple("VarLenFeature", ["dtype"])
VarLenFeature.__doc__ = ("A feature of any length (``tf.io.VarLenFeature``), parsed into a dense vector, not a "
                         "SparseTensor (docs/python.md).")

def string_tensor(value):
    """A string (bytes or str) as the engine holds strings: a uint8 vector of its bytes; tensors pass through."""
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return _nimbus.constant(np.frombuffer(value, np.uint8))
    return _nimbus.constant(value)


string = "string"  # the dtype of bytes features: nimbus.io.FixedLenFeature([], nimbus.io.string)


def _kind(dtype, name):
    if isinstance(dtype, str) and dtype == string:
        return "bytes"
    dtype = _nimbus.as_dtype(dtype)
    if dtype == DType.float32:
        return "float"
    if dtype == DType.int64:
        return "int64"
    raise InvalidArgumentError(f"feature '{name}': dtype {dtype.name} is not one of float32, int64, string",
                               "tf.train.Example holds float32, int64 and bytes lists")


def _features(features):
    entries = []
    for name in sorted(features):
        feature = features[name]
        if isinstance(feature, VarLenFeature):
            entries.append((name, True, _kind(feature.dtype, name), [], None))
        elif isinstance(feature, FixedLenFeature):
            default = feature.default_value
            if default is not None:
                default = [float(v) for v in nest.flatten(list(default) if isinstance(default, (list, tuple))
                                                           else [default])]
            entries.append((name, False, _kind(feature.dtype, name), [int(d) for d in feature.shape], default))
        else:
            raise InvalidArgumentError(f"feature '{name}' is a {type(feature).__name__}",
                                       "use nimbus.io.FixedLenFeature or nimbus.io.VarLenFeature")
    return entries


def parse_single_example(serialized, features, name=None, example_names=None):  # pylint: disable=unused-argument
    """A dict of tensors, one per feature, from one serialized tf.train.Example (a string)."""
    outputs = _nimbus._data_op("parse_example", [string_tensor(serialized)],  # pylint: disable=protected-access
                               {"features": _features(features)})
    return dict(zip(sorted(features), outputs))


def parse_example(serialized, features, name=None, example_names=None):  # pylint: disable=unused-argument
    """A dict of tensors, one per feature, each with the batch's first axis, from a batch of serialized
    tf.train.Examples: the rows of a uint8 matrix, so records of one length (as fixed-size Examples are;
    docs/python.md). A single record parses as ``parse_single_example`` does."""
    outputs = _nimbus._data_op("parse_example", [string_tensor(serialized)],  # pylint: disable=protected-access
                               {"features": _features(features)})
    return dict(zip(sorted(features), outputs))


def decode_raw(input_bytes, out_type, little_endian=True, fixed_length=None, name=None):  # pylint: disable=unused-argument
    """The bytes of a string reinterpreted as a vector of ``out_type`` values (little-endian)."""
    if not little_endian or fixed_length is not None:
        raise InvalidArgumentError("decode_raw: little_endian=False and fixed_length are not supported",
                                   "decode little-endian values of the whole string")
    return _nimbus._data_op("decode_raw", [string_tensor(input_bytes)], {"dtype": _nimbus.as_dtype(out_type)})[0]  # pylint: disable=protected-access


def encode_jpeg(image, quality=95, name=None):  # pylint: disable=unused-argument
    """A uint8 (H, W, 1) or (H, W, 3) image as JPEG bytes (libjpeg-turbo; ``bytes``, where TensorFlow gives a
    string tensor)."""
    return _nimbus._encode_jpeg(_nimbus.constant(image), int(quality))  # pylint: disable=protected-access


def read_file(filename, name=None):  # pylint: disable=unused-argument
    """The bytes of a file, as a string (a uint8 vector); ``filename`` a string or a string tensor."""
    return _nimbus._data_op("read_file", [string_tensor(filename)], {})[0]  # pylint: disable=protected-access
