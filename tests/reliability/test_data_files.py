"""Damaged and hostile data files, as `nimbus train` (and `nimbus data to-tfrecord`) meet them.

Each case writes tiny files (IDX, TFRecord of tf.train.Example, CSV, JPEG, PNG) with one fault, runs
the real command, and checks that the answer is a clean refusal naming the file and the record (or
line and column) at fault and the remedy, or, where the config asks to skip bad records
(data.train.ignore_errors / max_bad_records, docs/data.md), that the run trains and names what it
skipped.
"""

import gzip
import json
import struct
import sys
from pathlib import Path

from nimbus_process import assert_refused, assert_succeeded, run_nimbus, write_idx, write_tiny_dataset

REPO = Path(__file__).resolve().parents[2]


# TFRecord framing, tf.train.Example and PNG, written independently of Nimbus's C++.
sys.path.insert(0, str(REPO / "tests" / "data" / "fixtures"))
from make_tfrecord_fixture import bytes_list, float_list, frame, int64_list, png_rgb  # noqa: E402
from make_tfrecord_fixture import example as example_of  # noqa: E402


def example(image: bytes, label, label_kind="int64") -> bytes:
    """A tf.train.Example {image: bytes [image], label: int64 [label]} (or a float label)."""
    label_feature = int64_list([label]) if label_kind == "int64" else float_list([label])
    return example_of([("image", bytes_list([image])), ("label", label_feature)])


def tiny_image(label: int) -> bytes:
    """4x4 u8 pixels whose bright quarter is the label (as write_tiny_dataset's)."""
    image = bytearray([10] * 16)
    for r in range(2):
        for c in range(2):
            image[((label // 2) * 2 + r) * 4 + (label % 2) * 2 + c] = 250
    return bytes(image)


def write_tfrecord(path: Path, records):
    path.write_bytes(b"".join(frame(r) for r in records))


def tiny_records(count=32):
    return [example(tiny_image(i % 4), i % 4) for i in range(count)]


def record_offset(records, index: int) -> int:
    return sum(len(r) + 16 for r in records[:index])


def flip_data_bit(path: Path, records, index: int):
    """Flips one bit in the data of record `index`: its data CRC no longer matches."""
    data = bytearray(path.read_bytes())
    data[record_offset(records, index) + 12 + 5] ^= 0x10
    path.write_bytes(bytes(data))


# ---- configs ----

MODEL_4x4 = "model:\n  name: tiny\n  input_shape: [4, 4, 1]\n  layers:\n    - Flatten: {}\n    - Dense: {units: 4}\n"
COMPILE = ("compile:\n  optimizer: {name: adam, learning_rate: 0.01}\n"
           "  loss: {name: sparse_categorical_crossentropy, from_logits: true}\n  metrics: [accuracy]\n")
RUNTIME = "runtime: {threads: 1, seed: 1, deterministic: true}\n"


def train_config(train_split: str, model=MODEL_4x4, fit="{epochs: 1, batch_size: 8, verbose: 0}") -> str:
    """A config with `train_split` (the lines under data.train, indented four spaces) and no validation."""
    return f"{model}{COMPILE}data:\n  train:\n{train_split}fit: {fit}\n{RUNTIME}"


def tfrecord_split(path: Path, extra="", shape="[4, 4, 1]") -> str:
    return (f"    source: tfrecord\n    files: {path}\n"
            f"    features: {{image: {{type: bytes}}, label: {{type: int64}}}}\n"
            f"    steps:\n      - decode_raw: {{dtype: uint8, shape: {shape}}}\n"
            f"      - convert_dtype: {{dtype: float32, scale: 0.00392156862745098}}\n{extra}")


def train(folder: Path, config_text: str, *extra):
    (folder / "cfg.yaml").write_text(config_text)
    return run_nimbus("train", folder / "cfg.yaml", "--run-dir", folder / "run", *extra)


# ---- IDX ----

def test_idx_truncated_names_the_file(tiny):
    images = tiny / "images.idx"
    images.write_bytes(images.read_bytes()[:100])
    assert_refused(run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "run"), "images.idx", "truncated")


def test_idx_wrong_magic_names_the_file(tiny):
    labels = tiny / "labels.idx"
    labels.write_bytes(b"\x12\x34" + labels.read_bytes()[2:])
    assert_refused(run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "run"), "labels.idx", "not an IDX")


def test_idx_huge_dims_are_refused_without_allocating(tiny):
    # A header claiming 4 x 65535 x 65535 x 65535 bytes (a petabyte) over 16 bytes of data.
    write_idx(tiny / "images.idx", (4, 65535, 65535, 65535), bytes(16))
    assert_refused(run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "run"), "images.idx")


def test_data_to_tfrecord_names_a_truncated_idx_source(tmp_path):
    source = tmp_path / "fashion"
    source.mkdir()
    write_tiny_dataset(tmp_path)
    for split in ("train", "t10k"):
        images = (tmp_path / "images.idx").read_bytes()
        (source / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(images[:len(images) // 2]))
        (source / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress((tmp_path / "labels.idx").read_bytes()))
    outcome = run_nimbus("data", "to-tfrecord", "--source-dir", source, "-o", tmp_path / "out")
    assert_refused(outcome, "images-idx3-ubyte", "truncated")


# ---- TFRecord and tf.train.Example ----

def test_tfrecord_flipped_bit_is_refused_naming_file_record_and_the_config_remedy(tmp_path):
    records = tiny_records()
    shard = tmp_path / "train.tfrecord"
    write_tfrecord(shard, records)
    flip_data_bit(shard, records, 5)
    outcome = train(tmp_path, train_config(tfrecord_split(shard)))
    assert_refused(outcome, "train.tfrecord", "record 5", f"byte offset {record_offset(records, 5)}", "CRC32C",
                   "data.train.ignore_errors: true")
    assert "ignore_errors()" not in outcome.stderr  # the C++ call, which a config cannot make


def test_tfrecord_flipped_bit_is_skipped_and_named_with_ignore_errors(tmp_path):
    records = tiny_records()
    shard = tmp_path / "train.tfrecord"
    write_tfrecord(shard, records)
    flip_data_bit(shard, records, 5)
    outcome = train(tmp_path, train_config(tfrecord_split(shard, "    ignore_errors: true\n    max_bad_records: 1\n")))
    assert_succeeded(outcome, "skipped bad record", "train.tfrecord', record 5", "data.train")
    # The count is in the run's summary too: the last epoch's input pipeline statistics.
    nodes = json.loads((tmp_path / "run" / "summary.json").read_text())["input_pipeline"]["nodes"]
    assert [n["errors_skipped"] for n in nodes if n["name"] == "ignore_errors"] == [1]


def test_tfrecord_bad_records_over_max_bad_records_stop_the_run(tmp_path):
    records = tiny_records()
    shard = tmp_path / "train.tfrecord"
    write_tfrecord(shard, records)
    for index in (3, 9, 20):
        flip_data_bit(shard, records, index)
    outcome = train(tmp_path, train_config(tfrecord_split(shard, "    ignore_errors: true\n    max_bad_records: 2\n")))
    # The count, the threshold, the last record and the remedy.
    assert_refused(outcome, "3 bad records", "max_bad_records (2)", "record 20", "data.train.max_bad_records")


def test_max_bad_records_without_ignore_errors_is_refused_at_load(tmp_path):
    shard = tmp_path / "train.tfrecord"
    write_tfrecord(shard, tiny_records())
    outcome = train(tmp_path, train_config(tfrecord_split(shard, "    max_bad_records: 3\n")))
    assert_refused(outcome, "cfg.yaml", "data.train.max_bad_records", "ignore_errors: true")


def test_example_with_a_wrong_feature_type_names_file_and_record(tmp_path):
    records = tiny_records()
    records[4] = example(tiny_image(0), 0.5, label_kind="float")
    shard = tmp_path / "train.tfrecord"
    write_tfrecord(shard, records)
    outcome = train(tmp_path, train_config(tfrecord_split(shard)))
    assert_refused(outcome, "train.tfrecord", "record 4", "'label'", "float", "int64")


def test_decode_raw_with_a_wrong_size_names_file_and_record(tmp_path):
    records = tiny_records()
    records[6] = example(tiny_image(2)[:15], 2)
    shard = tmp_path / "train.tfrecord"
    write_tfrecord(shard, records)
    outcome = train(tmp_path, train_config(tfrecord_split(shard)))
    assert_refused(outcome, "train.tfrecord", "record 6", "decode_raw", "15 bytes")


def test_missing_tfrecord_file_is_named(tmp_path):
    outcome = train(tmp_path, train_config(tfrecord_split(tmp_path / "nowhere.tfrecord")))
    assert_refused(outcome, "data.train.files", "nowhere.tfrecord")


# ---- CSV ----

MODEL_2 = "model:\n  name: tiny\n  input_shape: [2]\n  layers:\n    - Dense: {units: 2}\n"


def csv_split(path: Path, extra="") -> str:
    return (f"    source: csv\n    files: {path}\n"
            f"    columns: [{{width: float32}}, {{height: float32}}, {{label: int64}}]\n"
            f"    x: [width, height]\n    y: label\n{extra}")


def write_csv(path: Path, bad_line: str = None, at=3):
    """A header and 16 rows; `bad_line` replaces line `at` (1 is the header)."""
    lines = ["width,height,label"] + [f"{i % 4}.5,{i % 3}.25,{i % 2}" for i in range(16)]
    if bad_line is not None:
        lines[at - 1] = bad_line
    path.write_text("\n".join(lines) + "\n")


def test_csv_nan_in_a_feature_column_is_refused_naming_line_and_column(tmp_path):
    write_csv(tmp_path / "t.csv", "1.5,NaN,0", at=4)
    outcome = train(tmp_path, train_config(csv_split(tmp_path / "t.csv"), model=MODEL_2))
    assert_refused(outcome, "t.csv", "line 4", "'height'", "NaN", "allow_non_finite")


def test_csv_inf_in_any_case_is_refused(tmp_path):
    write_csv(tmp_path / "t.csv", "-INFINITY,2.5,1", at=7)
    outcome = train(tmp_path, train_config(csv_split(tmp_path / "t.csv"), model=MODEL_2))
    assert_refused(outcome, "t.csv", "line 7", "'width'", "-INFINITY")


def test_csv_non_finite_values_pass_when_the_config_allows_them(tmp_path):
    write_csv(tmp_path / "t.csv", "inf,2.5,1", at=7)
    outcome = train(tmp_path, train_config(csv_split(tmp_path / "t.csv", "    allow_non_finite: true\n"),
                                           model=MODEL_2))
    assert_succeeded(outcome)


def test_csv_ragged_row_names_line_and_the_remedy(tmp_path):
    write_csv(tmp_path / "t.csv", "1.5,2.5,0,9", at=5)
    outcome = train(tmp_path, train_config(csv_split(tmp_path / "t.csv"), model=MODEL_2))
    assert_refused(outcome, "t.csv", "line 5", "expected 3 columns, found 4", "data.train.ignore_errors")


def test_csv_30_mb_field_is_quoted_short(tmp_path):
    write_csv(tmp_path / "t.csv", "1.5" + "x" * (30 << 20) + ",2.5,0", at=3)
    outcome = train(tmp_path, train_config(csv_split(tmp_path / "t.csv"), model=MODEL_2))
    assert_refused(outcome, "t.csv", "line 3", "'width'", "31457283 bytes")
    assert len(outcome.stderr) < 4000, f"the message is {len(outcome.stderr)} characters long"


def test_csv_ragged_row_is_skipped_with_ignore_errors(tmp_path):
    write_csv(tmp_path / "t.csv", "1.5,2.5", at=5)
    outcome = train(tmp_path, train_config(csv_split(tmp_path / "t.csv", "    ignore_errors: true\n"), model=MODEL_2))
    assert_succeeded(outcome, "skipped bad record", "t.csv', line 5")


# ---- images ----

def corpus_jpeg() -> bytes:
    """An 8x6 RGB JPEG written by libjpeg-turbo (fuzz/corpus/image/rgb_jpeg, after its channel byte)."""
    return (REPO / "fuzz" / "corpus" / "image" / "rgb_jpeg").read_bytes()[1:]


def jpeg_segments(data: bytes):
    """(marker, offset, length) of each segment before the scan data, the SOS segment last."""
    at = 2
    while at < len(data):
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2:at + 4])[0]
        yield marker, at, length
        if marker == 0xDA:
            return
        at += 2 + length


def jpeg_size(data: bytes):
    """(height, width) from the JPEG's SOF marker."""
    for marker, at, _ in jpeg_segments(data):
        if 0xC0 <= marker <= 0xC3:
            return struct.unpack(">HH", data[at + 5:at + 9])
    raise ValueError("no SOF marker")


def cut_in_half(jpeg: bytes) -> bytes:
    """The JPEG cut in the middle of its pixel (scan) data: the headers whole, as a download cut short leaves
    a large photo (this one is too small for half of its bytes to reach the pixels)."""
    _, at, length = list(jpeg_segments(jpeg))[-1]
    scan = at + 2 + length
    return jpeg[:scan + (len(jpeg) - scan) // 2]


def png(width: int, height: int) -> bytes:
    return png_rgb(width, height, [[(x * 40 + y * 7) % 256 for x in range(width * 3)] for y in range(height)])


def image_folder(root: Path, make, suffix: str, count=4) -> Path:
    """photos/a/0..count-1 and photos/b/0..count-1, each made by make()."""
    for label in ("a", "b"):
        (root / "photos" / label).mkdir(parents=True)
        for i in range(count):
            (root / "photos" / label / f"{i}.{suffix}").write_bytes(make())
    return root / "photos"


def image_config(photos: Path, suffix: str, height: int, width: int, extra="") -> str:
    model = (f"model:\n  name: tiny\n  input_shape: [{height}, {width}, 3]\n  layers:\n"
             "    - Flatten: {}\n    - Dense: {units: 2}\n")
    split = (f"    source: files\n    files: {photos}/*/*.{suffix}\n"
             f"    steps:\n      - decode_image: {{channels: 3}}\n"
             f"      - convert_dtype: {{dtype: float32, scale: 0.00392156862745098}}\n{extra}")
    return train_config(split, model=model, fit="{epochs: 1, batch_size: 4, verbose: 0}")


def test_jpeg_cut_in_half_is_refused_naming_the_image(tmp_path):
    jpeg = corpus_jpeg()
    photos = image_folder(tmp_path, lambda: jpeg, "jpg")
    (photos / "b" / "2.jpg").write_bytes(cut_in_half(jpeg))
    height, width = jpeg_size(jpeg)
    outcome = train(tmp_path, image_config(photos, "jpg", height, width))
    assert_refused(outcome, "b/2.jpg", "Premature end of JPEG file", "allow_truncated_images")


def test_jpeg_cut_in_half_trains_when_truncated_images_are_allowed(tmp_path):
    jpeg = corpus_jpeg()
    photos = image_folder(tmp_path, lambda: jpeg, "jpg")
    (photos / "b" / "2.jpg").write_bytes(cut_in_half(jpeg))
    height, width = jpeg_size(jpeg)
    outcome = train(tmp_path, image_config(photos, "jpg", height, width, "    allow_truncated_images: true\n"))
    assert_succeeded(outcome)


def test_jpeg_cut_in_half_is_skipped_and_named_with_ignore_errors(tmp_path):
    jpeg = corpus_jpeg()
    photos = image_folder(tmp_path, lambda: jpeg, "jpg")
    (photos / "b" / "2.jpg").write_bytes(cut_in_half(jpeg))
    height, width = jpeg_size(jpeg)
    outcome = train(tmp_path, image_config(photos, "jpg", height, width, "    ignore_errors: true\n"))
    assert_succeeded(outcome, "skipped bad record", "b/2.jpg")


def test_corrupt_png_is_refused_naming_the_image(tmp_path):
    good = png(5, 3)
    photos = image_folder(tmp_path, lambda: good, "png")
    bad = bytearray(good)
    bad[good.index(b"IDAT") + 8] ^= 0xFF  # inside the compressed pixels: the chunk's CRC fails
    (photos / "a" / "1.png").write_bytes(bytes(bad))
    outcome = train(tmp_path, image_config(photos, "png", 3, 5))
    assert_refused(outcome, "a/1.png", "corrupt PNG", "data.train.ignore_errors")


def test_corrupt_png_is_skipped_and_named_with_ignore_errors(tmp_path):
    good = png(5, 3)
    photos = image_folder(tmp_path, lambda: good, "png")
    (photos / "a" / "1.png").write_bytes(good[:40])
    outcome = train(tmp_path, image_config(photos, "png", 3, 5, "    ignore_errors: true\n"))
    assert_succeeded(outcome, "skipped bad record", "a/1.png")
