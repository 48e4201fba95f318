"""PyTorch's side of the input-pipeline benchmark (bench/jpeg_pipeline.sh): a DataLoader over DIR/0.jpg ...
running the same per-image work as Nimbus's pipeline (read the file, decode with torchvision's
libjpeg-turbo decoder, random crop 112, random horizontal flip, to float, normalize with mean 0.5 and
std 0.25) in shuffled batches of 128, with WORKERS worker processes (one torch thread each, as the
DataLoader sets them). Prints images per second over one pass, worker start-up included.

    /usr/bin/python3 bench/dataloader_jpeg.py DIR COUNT WORKERS
"""
import os
import sys
import time

import torch
from torchvision.io import ImageReadMode, decode_jpeg, read_file


class JpegFiles(torch.utils.data.Dataset):
    def __init__(self, directory, count):
        self.files = [os.path.join(directory, f"{i}.jpg") for i in range(count)]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        image = decode_jpeg(read_file(self.files[index]), mode=ImageReadMode.RGB)  # u8 [3, 128, 128]
        top, left = torch.randint(0, 128 - 112 + 1, (2,)).tolist()
        image = image[:, top:top + 112, left:left + 112]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        return (image.float().div_(255) - 0.5) / 0.25


def main():
    directory, count, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(JpegFiles(directory, count), batch_size=128, shuffle=True,
                                         num_workers=workers)
    start = time.perf_counter()
    images = 0
    for batch in loader:
        images += batch.shape[0]
    assert batch.shape[1:] == (3, 112, 112) and batch.dtype == torch.float32
    print(f"{images / (time.perf_counter() - start):.0f}")


if __name__ == "__main__":
    main()
