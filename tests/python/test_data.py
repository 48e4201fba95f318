"""nimbus.data.Dataset as TensorFlow's tf.data guide uses it: each method against a plain-Python reference,
element_spec, traced maps and filters (and what cannot be traced), py_function, files, and fit."""
import gzip
import os
import struct
import zlib

import numpy as np
import pytest

import nimbus as tf


def values(dataset):
    """The dataset's elements as nested Python lists and numbers."""
    def plain(x):
        return x.tolist() if isinstance(x, np.ndarray) else x
    return [tf.nest.map_structure(plain, element) for element in dataset.as_numpy_iterator()]


# ---- sources ----

def test_from_tensor_slices_of_arrays_tuples_and_dicts():
    features = np.arange(12, dtype=np.float32).reshape(4, 3)
    labels = np.array([0, 1, 0, 1], np.int64)
    assert values(tf.data.Dataset.from_tensor_slices(features)) == features.tolist()
    assert values(tf.data.Dataset.from_tensor_slices((features, labels))) == \
        [(f.tolist(), int(l)) for f, l in zip(features, labels)]
    by_name = tf.data.Dataset.from_tensor_slices({"x": features, "y": labels})
    assert values(by_name) == [{"x": f.tolist(), "y": int(l)} for f, l in zip(features, labels)]
    assert by_name.element_spec == {"x": tf.TensorSpec([3], tf.float32), "y": tf.TensorSpec([], tf.int64)}


def test_iteration_yields_nimbus_tensors():
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((2, 3), np.float32), np.array([4, 5], np.int64)))
    for x, y in dataset:
        assert isinstance(x, tf.Tensor) and isinstance(y, tf.Tensor)
        assert x.shape == (3,) and x.dtype == tf.float32 and y.dtype == tf.int64
    assert [int(y) for _, y in dataset] == [4, 5]


def test_from_tensors_and_range():
    assert values(tf.data.Dataset.from_tensors(np.array([1, 2, 3], np.int32))) == [[1, 2, 3]]
    assert values(tf.data.Dataset.range(5)) == list(range(5))
    assert values(tf.data.Dataset.range(2, 11, 3)) == list(range(2, 11, 3))
    assert tf.data.Dataset.range(3).element_spec == tf.TensorSpec([], tf.int64)
    assert tf.data.Dataset.range(3, output_type=tf.int32).element_spec == tf.TensorSpec([], tf.int32)


def test_from_generator():
    def gen(n):
        for i in range(n):
            yield np.full([2], i, np.float32), i

    dataset = tf.data.Dataset.from_generator(
        gen, args=(3,), output_signature=(tf.TensorSpec([2], tf.float32), tf.TensorSpec([], tf.int64)))
    assert values(dataset) == [([float(i)] * 2, i) for i in range(3)]
    assert values(dataset) == values(dataset)  # each iteration starts the generator afresh


def write_tfrecord(path, records, compress=None):
    def masked_crc(data):  # TFRecord's CRC32C, masked
        crc = 0xFFFFFFFF
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
        crc ^= 0xFFFFFFFF
        return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    body = b"".join(struct.pack("<Q", len(r)) + struct.pack("<I", masked_crc(struct.pack("<Q", len(r)))) + r +
                    struct.pack("<I", masked_crc(r)) for r in records)
    with open(path, "wb") as file:
        file.write(gzip.compress(body) if compress == "GZIP" else zlib.compress(body) if compress == "ZLIB" else body)


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_tfrecord_dataset(tmp_path, compression):
    records = [b"first", b"", b"third record"]
    path = str(tmp_path / "a.tfrecord")
    write_tfrecord(path, records, compression)
    dataset = tf.data.TFRecordDataset(path, compression_type=compression)
    assert list(dataset.as_numpy_iterator()) == records


def test_text_line_and_list_files(tmp_path):
    for name, lines in (("a.txt", ["one", "two"]), ("b.txt", ["three"])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    files = tf.data.Dataset.list_files(str(tmp_path / "*.txt"), shuffle=False)
    assert list(files.as_numpy_iterator()) == [str(tmp_path / "a.txt").encode(), str(tmp_path / "b.txt").encode()]
    assert sorted(tf.data.Dataset.list_files(str(tmp_path / "*.txt")).as_numpy_iterator()) == \
        sorted(files.as_numpy_iterator())
    assert list(tf.data.TextLineDataset(str(tmp_path / "a.txt")).as_numpy_iterator()) == [b"one", b"two"]
    lines = tf.data.TextLineDataset(files)  # a dataset of file names, as TensorFlow takes it
    assert list(lines.as_numpy_iterator()) == [b"one", b"two", b"three"]


# ---- transforms against Python ----

def test_map_filter_and_the_spec_they_give():
    dataset = tf.data.Dataset.range(10)
    squares = dataset.map(lambda x: x * x)
    assert values(squares) == [x * x for x in range(10)]
    pairs = dataset.map(lambda x: (tf.cast(x, tf.float32) / 2, x + 1), num_parallel_calls=tf.data.AUTOTUNE)
    assert values(pairs) == [(x / 2, x + 1) for x in range(10)]
    assert pairs.element_spec == (tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int64))
    assert values(dataset.filter(lambda x: tf.logical_or(x < 2, x > 7))) == [x for x in range(10) if x < 2 or x > 7]
    # A dict in, a dict out (TensorFlow passes a dict element whole; a tuple's parts as arguments).
    named = tf.data.Dataset.from_tensor_slices({"a": np.arange(3, dtype=np.float32)})
    assert values(named.map(lambda d: {"b": d["a"] * 2})) == [{"b": 2.0 * i} for i in range(3)]


def test_parallel_map_keeps_order_and_values():
    images = np.random.default_rng(0).random((64, 8, 8), np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(images).map(lambda x: tf.reduce_sum(x * 2.0 + 1.0),
                                                             num_parallel_calls=4)
    np.testing.assert_allclose(values(dataset), (images * 2 + 1).sum(axis=(1, 2)), rtol=1e-5)


def test_flat_map_and_interleave():
    dataset = tf.data.Dataset.range(1, 4)
    flat = dataset.flat_map(lambda n: tf.data.Dataset.range(int(n)).map(lambda i: i + n * 10))
    assert values(flat) == [n * 10 + i for n in range(1, 4) for i in range(n)]
    # The example of TensorFlow's Dataset.interleave documentation, with its printed result.
    woven = tf.data.Dataset.range(1, 6).interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(6),
                                                   cycle_length=2, block_length=4)
    assert values(woven) == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5,
                             5, 5]


def test_shuffle_is_a_permutation_and_seeded():
    dataset = tf.data.Dataset.range(100)
    shuffled = values(dataset.shuffle(100, seed=3))
    assert sorted(shuffled) == list(range(100)) and shuffled != list(range(100))
    assert values(dataset.shuffle(100, seed=3)) == shuffled
    epochs = dataset.shuffle(100, seed=3, reshuffle_each_iteration=True).repeat(2)
    first, second = values(epochs)[:100], values(epochs)[100:]
    assert sorted(first) == sorted(second) == list(range(100)) and first != second


def test_batch_padded_batch_unbatch():
    dataset = tf.data.Dataset.range(7)
    assert values(dataset.batch(3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert values(dataset.batch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    assert dataset.batch(3).element_spec == tf.TensorSpec([None], tf.int64)
    assert dataset.batch(3, drop_remainder=True).element_spec == tf.TensorSpec([3], tf.int64)
    assert values(dataset.batch(3).unbatch()) == list(range(7))
    ragged = tf.data.Dataset.range(1, 4).flat_map(
        lambda n: tf.data.Dataset.from_tensors(tf.fill([int(n)], n)))
    assert values(ragged.padded_batch(3)) == [[[1, 0, 0], [2, 2, 0], [3, 3, 3]]]
    assert values(ragged.padded_batch(2, padded_shapes=[4], padding_values=-1)) == \
        [[[1, -1, -1, -1], [2, 2, -1, -1]], [[3, 3, 3, -1]]]


def test_repeat_take_skip_shard_enumerate_zip():
    dataset = tf.data.Dataset.range(5)
    assert values(dataset.repeat(2)) == list(range(5)) * 2
    assert values(dataset.repeat().take(12)) == (list(range(5)) * 3)[:12]
    assert values(dataset.skip(2).take(2)) == [2, 3]
    assert values(dataset.shard(2, 1)) == [1, 3]
    assert values(dataset.enumerate(start=10)) == [(10 + i, i) for i in range(5)]
    letters = tf.data.Dataset.from_tensor_slices(np.array([7, 8, 9], np.int32))
    assert values(tf.data.Dataset.zip((dataset, letters))) == [(0, 7), (1, 8), (2, 9)]
    assert values(tf.data.Dataset.zip(dataset, letters)) == [(0, 7), (1, 8), (2, 9)]


def test_cardinality_and_len():
    dataset = tf.data.Dataset.range(10)
    assert int(dataset.cardinality()) == 10 and len(dataset) == 10
    assert int(dataset.batch(3).cardinality()) == 4
    assert int(dataset.repeat().cardinality()) == tf.data.INFINITE_CARDINALITY
    assert int(dataset.filter(lambda x: x > 2).cardinality()) == tf.data.UNKNOWN_CARDINALITY
    with pytest.raises(TypeError, match="infinite"):
        len(dataset.repeat())


def test_cache_in_memory_and_in_a_file(tmp_path):
    calls = []

    def count(x):
        calls.append(int(x))
        return x

    dataset = tf.data.Dataset.range(4).map(lambda x: tf.py_function(count, [x], tf.int64))
    cached = dataset.cache()
    assert values(cached) == [0, 1, 2, 3] and values(cached) == [0, 1, 2, 3]
    assert calls == [0, 1, 2, 3]  # the second pass read the cache
    path = str(tmp_path / "cache")
    assert values(tf.data.Dataset.range(3).cache(path)) == [0, 1, 2]
    assert os.path.exists(path) or any(name.startswith("cache") for name in os.listdir(tmp_path))
    assert values(tf.data.Dataset.range(99).cache(path)) == [0, 1, 2]  # later runs read the file


def test_prefetch_changes_nothing_but_timing():
    dataset = tf.data.Dataset.range(20).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
    assert values(dataset.prefetch(tf.data.AUTOTUNE)) == values(dataset) == [2 * x for x in range(20)]


def test_ignore_errors_skips_a_failing_decode():
    chunks = [np.frombuffer(b, np.uint8) for b in (b"abcd", b"abc", b"efgh")]  # 3 bytes hold no int32
    records = tf.data.Dataset.from_generator(lambda: iter(chunks), output_signature=tf.TensorSpec([None], tf.uint8))
    words = records.map(lambda b: tf.io.decode_raw(b, tf.int32))
    with pytest.raises(tf.errors.OpError):
        values(words)
    assert values(words.ignore_errors()) == [[int.from_bytes(b"abcd", "little")], [int.from_bytes(b"efgh", "little")]]


# ---- tracing ----

def test_untraceable_map_names_py_function():
    dataset = tf.data.Dataset.range(4)
    with pytest.raises(TypeError, match="py_function"):
        dataset.map(lambda x: np.sin(x))
    with pytest.raises(TypeError, match="could not trace"):
        dataset.map(lambda x: x if x > 2 else -x)
    with pytest.raises(TypeError, match="py_function"):
        dataset.filter(lambda x: float(x) > 1)


def test_py_function_runs_python_per_element():
    dataset = tf.data.Dataset.range(5).map(
        lambda x: tf.py_function(lambda v: np.sin(v.numpy()).astype(np.float32), [x], tf.float32) * 2)
    np.testing.assert_allclose(values(dataset), 2 * np.sin(np.arange(5)), rtol=1e-6)
    # Outside a dataset function it runs at once.
    assert float(tf.py_function(lambda v: v * 3, [tf.constant(2.0)], tf.float32)) == 6.0


def test_traced_shapes_show_unknown_dimensions_as_none():
    seen = []

    def shape_of(x):
        seen.append(x.shape)
        return x

    tf.data.Dataset.range(3).batch(2).map(shape_of)
    assert seen == [(None,)]
    # What would depend on an unknown length at trace time is refused, not frozen into the map.
    batches = tf.data.Dataset.range(3).batch(2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="known only when"):
        batches.map(lambda x: x[1:])
    assert values(batches.map(lambda x: tf.slice(x, [1], [-1]))) == [[1], []]  # -1 resolved per element
    assert values(batches.map(lambda x: tf.reshape(x, [-1, 1]))) == [[[0], [1]], [[2]]]


# ---- parsing and images inside maps ----

def example(label, pixels):
    """A serialized tf.train.Example with an int64 'label' and a bytes 'image' (protobuf by hand)."""
    def field(number, wire, payload):
        return bytes([(number << 3) | wire]) + (varint(len(payload)) + payload if wire == 2 else payload)

    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if n == 0:
                return out

    def feature(name, kind, value):
        return field(1, 2, field(1, 2, name.encode()) + field(2, 2, field(kind, 2, value)))

    label_feature = feature("label", 3, field(1, 2, varint(label)))
    image_feature = feature("image", 1, field(1, 2, pixels))
    return field(1, 2, label_feature + image_feature)


def test_parse_single_example_and_decode_raw_in_a_map(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (5, 4, 4), np.uint8)
    path = str(tmp_path / "data.tfrecord")
    write_tfrecord(path, [example(i, images[i].tobytes()) for i in range(5)])
    features = {"image": tf.io.FixedLenFeature([], tf.io.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        parsed = tf.io.parse_single_example(record, features)
        image = tf.reshape(tf.io.decode_raw(parsed["image"], tf.uint8), [4, 4])
        return tf.cast(image, tf.float32) / 255.0, parsed["label"]

    dataset = tf.data.TFRecordDataset(path).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    assert dataset.element_spec == (tf.TensorSpec([4, 4], tf.float32), tf.TensorSpec([], tf.int64))
    got = list(dataset.as_numpy_iterator())
    for i, (image, label) in enumerate(got):
        assert label == i
        np.testing.assert_allclose(image, images[i] / 255.0, rtol=1e-6)
    # parse_example after batch, as TensorFlow's performance guide has it (records of one length here).
    batched = tf.data.TFRecordDataset(path).batch(5, drop_remainder=True).map(
        lambda records: tf.io.parse_example(records, features))
    (parsed,) = list(batched.as_numpy_iterator())
    assert parsed["label"].tolist() == list(range(5))
    np.testing.assert_array_equal(parsed["image"], images.reshape(5, 16))
    var = {"label": tf.io.VarLenFeature(tf.int64)}
    assert values(tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_example(r, var)["label"])) == \
        [[i] for i in range(5)]


def png_bytes(image):
    """An 8-bit RGB PNG of `image`, written by hand (filter 0 on every row)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    height, width, _ = image.shape
    rows = b"".join(b"\0" + image[y].tobytes() for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def from_bytes(files):
    return tf.data.Dataset.from_generator(lambda: iter(files), output_signature=tf.TensorSpec([None], tf.uint8))


def test_image_ops_in_a_map_against_eager_results():
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (3, 10, 12, 3), np.uint8)
    dataset = from_bytes([np.frombuffer(png_bytes(image), np.uint8) for image in images])  # lossless

    decoded = values(dataset.map(lambda b: tf.image.decode_png(b, channels=3)))
    for got, want in zip(decoded, images):
        np.testing.assert_array_equal(got, want)
    resized = dataset.map(lambda b: tf.image.resize(tf.image.decode_image(b, channels=3), [5, 6]))
    assert resized.element_spec == tf.TensorSpec([5, 6, 3], tf.float32)
    for got, image in zip(values(resized), images):
        np.testing.assert_allclose(got, tf.image.resize(image, [5, 6]).numpy(), rtol=1e-6)
    converted = values(dataset.map(lambda b: tf.image.convert_image_dtype(tf.image.decode_png(b), tf.float32)))
    for got, image in zip(converted, images):
        np.testing.assert_allclose(got, image / 255.0, rtol=1e-6)


def test_decode_and_crop_jpeg_in_a_map_is_the_window_of_the_decoded_image():
    images = np.random.default_rng(4).integers(0, 256, (3, 40, 48, 3), np.uint8)
    jpegs = [np.frombuffer(tf.io.encode_jpeg(image), np.uint8) for image in images]
    whole = values(from_bytes(jpegs).map(lambda b: tf.io.decode_jpeg(b, channels=3)))
    window = [9, 17, 16, 24]  # offset_y, offset_x, height, width
    crops = from_bytes(jpegs).map(lambda b: tf.image.decode_and_crop_jpeg(b, window, channels=3))
    for crop, image in zip(values(crops), whole):
        np.testing.assert_array_equal(crop, np.asarray(image)[9:25, 17:41])
    # A window computed in the map, as TensorFlow's random-crop preprocessing computes one.
    def random_window(b):
        offset = tf.cast(tf.random.uniform([2], 0, 1) * tf.constant([25.0, 25.0]), tf.int32)
        return tf.image.decode_and_crop_jpeg(b, tf.concat([offset, tf.constant([16, 24], tf.int32)], 0), 3)
    for crop in values(from_bytes(jpegs).map(random_window)):
        assert np.asarray(crop).shape == (16, 24, 3)


def test_cast_of_uint8_then_scalar_arithmetic_is_one_pass_with_the_same_values():
    """A cast from uint8 followed by scalar mul/add/sub/div runs as one scale-and-shift step (the C++
    pipeline's normalize kernel); its values are the unfused ops' within one rounding."""
    from nimbus.data.dataset import _TracedFunction  # pylint: disable=import-outside-toplevel
    image = np.random.default_rng(5).integers(0, 256, (7, 9, 3), np.uint8)
    dataset = tf.data.Dataset.from_tensors(image)
    x = image.astype(np.float32)
    cases = [
        (lambda v: tf.cast(v, tf.float32) * (1 / (255 * 0.25)) - 0.5 / 0.25,
         x * np.float32(1 / (255 * 0.25)) - np.float32(0.5 / 0.25)),
        (lambda v: (tf.cast(v, tf.float32) / 255.0 - 0.5) / 0.25, (x / np.float32(255) - np.float32(0.5)) / 0.25),
        (lambda v: 2.0 - tf.cast(v, tf.float32) * 3.0 + 1.0, np.float32(2) - x * np.float32(3) + np.float32(1)),
    ]
    for fn, expected in cases:
        program = _TracedFunction(fn, dataset.element_spec, "Dataset.map").engine.to_text()
        assert "host scale_shift_to_f32(%0)" in program and "cast" not in program, program
        (got,) = values(dataset.map(fn))
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    # Before batch, a parallel map writes each image straight into its row: the same batches.
    fn, expected = cases[0]
    images = tf.data.Dataset.from_tensor_slices(np.stack([image + i for i in range(20)]).astype(np.uint8))
    batched = values(images.map(fn, num_parallel_calls=2).batch(8))
    sequential = values(images.map(fn).batch(8))
    assert [np.shape(b) for b in batched] == [(8, 7, 9, 3), (8, 7, 9, 3), (4, 7, 9, 3)]
    for got, want in zip(batched, sequential):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(batched[0][0], expected, rtol=1e-6, atol=1e-6)
    # Not a scalar affine chain: the ops run as traced.
    for fn, expected in [(lambda v: tf.exp(tf.cast(v, tf.float32) / 255.0), np.exp(x / np.float32(255))),
                         (lambda v: tf.cast(v, tf.float32) * tf.constant([1.0, 2.0, 3.0]), x * [1, 2, 3])]:
        assert "scale_shift" not in _TracedFunction(fn, dataset.element_spec, "Dataset.map").engine.to_text()
        np.testing.assert_allclose(values(dataset.map(fn))[0], expected, rtol=1e-6)


def test_a_random_flip_before_cast_and_scalar_arithmetic_joins_the_same_pass():
    """tf.image.random_flip_left_right, then a cast and scalar arithmetic: one step that reads the rows
    reversed when it draws a flip; each element is the normalized image or its mirror, both occur."""
    from nimbus.data.dataset import _TracedFunction  # pylint: disable=import-outside-toplevel
    image = np.random.default_rng(6).integers(0, 256, (9, 13, 3), np.uint8)
    dataset = tf.data.Dataset.from_tensors(image).repeat(40)

    def fn(v):
        return tf.cast(tf.image.random_flip_left_right(v), tf.float32) / 255.0 - 0.5

    program = _TracedFunction(fn, dataset.element_spec, "Dataset.map").engine.to_text()
    assert "host random_flip_scale_shift_to_f32(%0)" in program and "cast" not in program, program
    plain = image.astype(np.float32) / np.float32(255) - np.float32(0.5)
    kinds = set()
    for got in values(dataset.map(fn, num_parallel_calls=2).batch(8).unbatch()):
        got = np.asarray(got)
        flipped = np.allclose(got, plain[:, ::-1], rtol=1e-6, atol=1e-6)
        assert flipped or np.allclose(got, plain, rtol=1e-6, atol=1e-6)
        kinds.add(flipped)
    assert kinds == {True, False}
    # Used twice, the flipped image is kept: the flip stays its own step.
    program = _TracedFunction(lambda v: (lambda f: (tf.cast(f, tf.float32) / 255.0 - 0.5, f))(
        tf.image.random_flip_left_right(v)), dataset.element_spec, "Dataset.map").engine.to_text()
    assert "host random_flip_left_right(%0)" in program and "host scale_shift_to_f32" in program, program


def test_random_ops_in_a_map_draw_per_element():
    image = np.arange(4 * 6 * 1, dtype=np.uint8).reshape(4, 6, 1)
    dataset = tf.data.Dataset.from_tensors(image).repeat(64)
    crops = values(dataset.map(lambda x: tf.image.random_crop(x, [2, 3, 1])))
    windows = {tuple(np.asarray(c).ravel()) for c in crops}
    reference = {tuple(image[y:y + 2, x:x + 3].ravel()) for y in range(3) for x in range(4)}
    assert windows <= reference and len(windows) > 1
    flips = values(dataset.map(tf.image.random_flip_left_right))
    kinds = {tuple(np.asarray(f).ravel()) for f in flips}
    assert kinds == {tuple(image.ravel()), tuple(image[:, ::-1].ravel())}
    draws = values(tf.data.Dataset.range(64).map(lambda _: tf.random.uniform([], 0, 10, dtype=tf.int64)))
    assert set(draws) <= set(range(10)) and len(set(draws)) > 3


# ---- training ----

def test_fit_from_a_dataset_with_dataset_validation():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256, seed=1).batch(32)
    validation = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(32)
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(2)])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.05),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(train, epochs=5, validation_data=validation, verbose=0)
    assert len(history.history["loss"]) == 5 and history.history["loss"][-1] < history.history["loss"][0]
    assert history.params["steps"] == 8
    _, accuracy = model.evaluate(validation, verbose=0)
    assert accuracy > 0.9
    assert history.history["val_accuracy"][-1] == pytest.approx(accuracy, abs=1e-6)
    assert model.predict(validation, verbose=0).shape == (64, 2)
