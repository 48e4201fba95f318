#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (fuzz/corpus/TARGET/): a few small valid inputs per parser,
so the fuzzers start from the formats' real structure. Run from anywhere; the files are committed."""
import gzip
import os
import struct
import zlib

here = os.path.dirname(os.path.abspath(__file__))
corpus = os.path.join(here, "corpus")
fixtures = os.path.join(here, "..", "tests", "data", "fixtures")


def write(target, name, data):
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)


def idx(type_code, dims, payload):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


# IDX: u8 images (2, 3, 2), u8 labels, i16 and f32 elements, and a gzip-compressed file.
images = idx(0x08, [2, 3, 2], bytes(range(12)))
write("idx", "images_u8", images)
write("idx", "labels_u8", idx(0x08, [3], bytes([1, 0, 9])))
write("idx", "i16", idx(0x0B, [2, 2], struct.pack(">4h", -1, 2, 300, -400)))
write("idx", "f32", idx(0x0D, [3], struct.pack(">3f", 0.5, -2.0, 1e9)))
write("idx", "images_gzip", gzip.compress(images, mtime=0))

# CSV: quoted fields with commas, doubled quotes and a line break; CRLF line ends.
write("csv", "quoted", b'a,b,c\n1.5,2,"x, y"\n-3e2,4,"say ""hi"""\n7,-8,"two\nlines"\n')
write("csv", "crlf", b"a,b,c\r\n0.25,1,z\r\n")

# TFRecord: the first byte picks the compression (0 none, 1 zlib, 2 gzip); the fixtures were
# made by an independent writer (tests/data/fixtures/make_tfrecord_fixture.py).
plain = open(os.path.join(fixtures, "examples.tfrecord"), "rb").read()
write("tfrecord", "plain", b"\x00" + plain)
write("tfrecord", "zlib", b"\x01" + zlib.compress(plain))
write("tfrecord", "gzip", b"\x02" + open(os.path.join(fixtures, "examples.tfrecord.gz"), "rb").read())


# Images: the first byte picks the channels (0 as stored, 1, 3, 4); a 3x2 RGB PNG. The corpus's
# JPEGs (gray_jpeg, rgb_jpeg: 8x6, quality 80) were written once by nimbus::data::encode_jpeg
# (libjpeg-turbo), with the byte 0x03 in front.
def png(width, height, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + row for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


write("image", "rgb_png", b"\x00" + png(3, 2, [bytes(range(9)), bytes(range(100, 109))]))


# Config (the YAML loader): a config as nimbus train reads it, and the hostile texts issue 21 found:
# a self-alias (block and flow), nine levels of aliases of aliases (a billion laughs), a repeated key.
os.makedirs(os.path.join(corpus, "config"), exist_ok=True)
write("config", "mlp", open(os.path.join(here, "..", "examples", "fashion_mnist_mlp.yaml"), "rb").read())
write("config", "self_alias", b"a: &a\n  b: *a\n")
write("config", "self_alias_flow", b"fit: {batch_size: &a [*a]}\n")
laughs = ['l0: &l0 "lol"'] + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
write("config", "billion_laughs", ("\n".join(laughs) + "\n").encode())
write("config", "repeated_key", b"fit:\n  epochs: 2\n  epochs: 3\n")
write("config", "anchors", b"base: &base {units: 4, activation: relu}\nlayers:\n  - Dense: *base\n  - Dense: *base\n")
