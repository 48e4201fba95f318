"""``nimbus.image``: TensorFlow's tf.image for images of shape (H, W, C) or batches (N, H, W, C).

Flips and crops are gathers and slices (ops: they differentiate and trace); ``resize`` runs the data
pipeline's bilinear resize (nimbus/data/image_ops.h) on the host, per image, and is neither recorded
on a GradientTape nor traced by nimbus.function. Decoding, ``resize``, ``random_crop`` and
``random_flip_left_right`` inside a function that ``Dataset.map`` traces are steps of the traced
program (python/src/data_ops.cc), run on the pipeline's threads and drawing anew for each element.
"""
import numpy as np

from nimbus import _nimbus
from nimbus import random as _random
from nimbus._nimbus import DType
from nimbus.array_ops import reverse, stack
from nimbus.errors import InvalidArgumentError, UnimplementedError


def _in_dataset_function():
    """Whether a function that Dataset.map or filter traces is running: data ops become its steps."""
    return _nimbus._tracing_dataset_function()  # pylint: disable=protected-access


def _data_op(name, inputs, **attrs):
    return _nimbus._data_op(name, inputs, attrs)  # pylint: disable=protected-access


def _bytes(contents):
    from nimbus.io import string_tensor  # pylint: disable=import-outside-toplevel  (io imports this module)
    return string_tensor(contents)


def decode_image(contents, channels=None, dtype=DType.uint8, name=None, expand_animations=True):  # pylint: disable=unused-argument
    """A JPEG or PNG (told by its magic bytes) as uint8 (H, W, C); channels 0/None keeps the file's."""
    image = _data_op("decode_image", [_bytes(contents)], channels=int(channels or 0))[0]
    return image if _nimbus.as_dtype(dtype) == DType.uint8 else convert_image_dtype(image, dtype)


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True, try_recover_truncated=False,  # pylint: disable=unused-argument
                acceptable_fraction=1, dct_method="", name=None):
    """A JPEG as uint8 (H, W, C)."""
    return decode_image(contents, channels)


def decode_png(contents, channels=0, dtype=DType.uint8, name=None):  # pylint: disable=unused-argument
    """A PNG as uint8 (H, W, C) (16-bit samples scaled to 8 bits)."""
    return decode_image(contents, channels, dtype)


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,  # pylint: disable=unused-argument
                         try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """The window ``crop_window`` = [offset_y, offset_x, height, width] of a JPEG, decoding only that window."""
    window = _nimbus.constant(crop_window, DType.int64) if not isinstance(crop_window, _nimbus.Tensor) else crop_window
    return _data_op("decode_and_crop_jpeg", [_bytes(contents), window], channels=int(channels or 0))[0]


def _image(image):
    x = _nimbus.constant(image)
    if x.ndim not in (3, 4):
        raise InvalidArgumentError(f"an image has shape (H, W, C) or (N, H, W, C), not {list(x.shape)}",
                                   "add the channel axis with nimbus.expand_dims(image, -1)")
    return x


def flip_left_right(image):
    """Mirrors the width axis."""
    return reverse(_image(image), -2)


def flip_up_down(image):
    """Mirrors the height axis."""
    return reverse(_image(image), -3)


def _coin(seed):
    return float(_random.uniform([], seed=seed)) < 0.5


def random_flip_left_right(image, seed=None):
    """Mirrors the width axis with probability 1/2 (one draw for the call)."""
    if _in_dataset_function():
        return _data_op("random_flip_left_right", [_image(image)])[0]
    return flip_left_right(image) if _coin(seed) else _image(image)


def random_flip_up_down(image, seed=None):
    """Mirrors the height axis with probability 1/2 (one draw for the call)."""
    return flip_up_down(image) if _coin(seed) else _image(image)


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The window [offset_height, + target_height) x [offset_width, + target_width)."""
    x = _image(image)
    begin = [offset_height, offset_width, 0]
    size = [target_height, target_width, -1]
    if x.ndim == 4:
        begin, size = [0] + begin, [-1] + size
    return _nimbus.slice(x, begin, size)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``image`` placed at (offset_height, offset_width) in zeros of (target_height, target_width)."""
    x = _image(image)
    height, width = x.shape[-3], x.shape[-2]
    paddings = [[offset_height, target_height - height - offset_height],
                [offset_width, target_width - width - offset_width], [0, 0]]
    if x.ndim == 4:
        paddings = [[0, 0]] + paddings
    return _nimbus.pad(x, paddings)


def random_crop(value, size, seed=None, name=None):  # pylint: disable=unused-argument
    """A window of ``size`` (one entry per axis of ``value``) at a uniformly drawn position."""
    x = _nimbus.constant(value)
    size = [int(s) for s in size]
    if _in_dataset_function() and x.ndim == 3 and len(size) == 3 and size[2] in (x.shape[2], -1):
        return _data_op("random_crop", [x], height=size[0], width=size[1])[0]
    if len(size) != x.ndim or any(s > d for s, d in zip(size, x.shape)):
        raise InvalidArgumentError(f"random_crop: size {size} does not fit in shape {list(x.shape)}",
                                   "give one size per axis, each at most the axis's length")
    begin = [int(_random.uniform([], 0, d - s + 1, dtype=DType.int64, seed=seed)) for s, d in zip(size, x.shape)]
    return _nimbus.slice(x, begin, size)


def central_crop(image, central_fraction):
    """The central ``central_fraction`` of the height and width."""
    x = _image(image)
    height, width = x.shape[-3], x.shape[-2]
    target_height, target_width = int(height * central_fraction), int(width * central_fraction)
    return crop_to_bounding_box(x, (height - target_height) // 2, (width - target_width) // 2, target_height,
                                target_width)


def resize(images, size, method="bilinear", preserve_aspect_ratio=False, antialias=False, name=None):  # pylint: disable=unused-argument
    """Bilinear resize to ``size`` = (height, width), half-pixel centers (TF2's rule); float32 out."""
    if method != "bilinear" or preserve_aspect_ratio or antialias:
        raise UnimplementedError(f"resize(method={method!r}, preserve_aspect_ratio={preserve_aspect_ratio}, "
                                 f"antialias={antialias}): bilinear without antialiasing only",
                                 "use method='bilinear'")
    x = _image(images)
    height, width = (int(s) for s in size)
    if _in_dataset_function() and x.ndim == 3:
        return _data_op("resize", [x], height=height, width=width)[0]
    if x.ndim == 3:
        return _nimbus._resize_bilinear(x, height, width)  # pylint: disable=protected-access
    return stack([_nimbus._resize_bilinear(x[i], height, width) for i in range(x.shape[0])])  # pylint: disable=protected-access


def convert_image_dtype(image, dtype, saturate=False, name=None):  # pylint: disable=unused-argument
    """uint8 <-> float: floats are in [0, 1], uint8 in [0, 255] (rounded and clamped going down)."""
    x = _nimbus.constant(image)
    dtype = _nimbus.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype == DType.uint8 and dtype.is_floating:
        return _nimbus.cast(x, dtype) / 255
    if x.dtype.is_floating and dtype == DType.uint8:
        scaled = _nimbus.clip_by_value(_nimbus.cast(x, DType.float32) * 255 + 0.5, 0, 255)
        return _nimbus.cast(scaled, DType.uint8)
    if x.dtype.is_floating and dtype.is_floating:
        return _nimbus.cast(x, dtype)
    raise UnimplementedError(f"convert_image_dtype from {x.dtype.name} to {dtype.name}", "use uint8 or a float dtype")


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1 / sqrt(N)) per image, N its number of elements; float32 out."""
    x = _image(image)
    if not x.dtype.is_floating:
        x = _nimbus.cast(x, DType.float32)
    axes = [-3, -2, -1]
    count = int(np.prod(x.shape[-3:]))
    mean = _nimbus.reduce_mean(x, axis=axes, keepdims=True)
    stddev = _nimbus.sqrt(_nimbus.reduce_variance(x, axis=axes, keepdims=True))
    return (x - mean) / _nimbus.maximum(stddev, 1.0 / np.sqrt(count))


def rgb_to_grayscale(images, name=None):  # pylint: disable=unused-argument
    """The ITU-R 601 luma of the last (RGB) axis, keeping it as one channel."""
    x = _nimbus.constant(images)
    weights = _nimbus.constant([0.2989, 0.5870, 0.1140], dtype=x.dtype)
    return _nimbus.reduce_sum(x * weights, axis=-1, keepdims=True)
