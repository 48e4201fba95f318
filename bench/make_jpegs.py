"""Writes COUNT 128x128 RGB JPEGs (quality 90, 4:2:0) made from the first Fashion-MNIST training images, for
the input-pipeline benchmark (bench/jpeg_pipeline.sh): each 28x28 image scaled up bilinearly, its grey
level mixing a random background and foreground colour, so the files decode like small photographs.

    /usr/bin/python3 bench/make_jpegs.py COUNT DIR      # DIR/0.jpg ... DIR/<COUNT-1>.jpg
"""
import gzip
import os
import sys

import numpy as np
from PIL import Image

IMAGES = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


def read_images(path, count):
    with gzip.open(path, "rb") as f:
        data = f.read()
    # IDX: magic, then one big-endian u32 per dimension (images, rows, columns), then u8 pixels.
    images, rows, columns = (int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(3))
    pixels = np.frombuffer(data, dtype=np.uint8, offset=16).reshape(images, rows, columns)
    return pixels[:count]


def main():
    count, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    for i, grey in enumerate(read_images(IMAGES, count)):
        alpha = np.asarray(Image.fromarray(grey).resize((128, 128), Image.BILINEAR), np.float32)[..., None] / 255
        background, foreground = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        rgb = (background * (1 - alpha) + foreground * alpha).clip(0, 255).astype(np.uint8)
        Image.fromarray(rgb, "RGB").save(os.path.join(out, f"{i}.jpg"), quality=90)


if __name__ == "__main__":
    main()
