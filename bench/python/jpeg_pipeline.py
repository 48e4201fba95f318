"""The JPEG input pipeline three ways, in one run: nimbus.data from Python with a traced map, the same
pipeline in C++ (bench/bench_data, AUTOTUNE), and PyTorch's DataLoader (bench/dataloader_jpeg.py, 1 and
2 workers: its best on this machine is the larger of the two). The work per image is the same: read the
file, decode only a random 112x112 window of the 128x128 JPEG, random flip, to float, normalize
(mean 0.5, std 0.25), batch 128. Each side runs as its own process, ROUNDS times, the order rotating
every round; each side's median images/s is printed with its range. Run it on a quiet machine.

    /usr/bin/python3 bench/python/jpeg_pipeline.py [COUNT=20000] [DIR=/tmp/nimbus-jpegs] [ROUNDS=5]

The files come from bench/make_jpegs.py (as bench/jpeg_pipeline.sh makes them); the build from
build/release (targets nimbus_python and bench_data).
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "release")


def nimbus_python_rate(directory, count):
    """This process's side: images/s of the pipeline built with nimbus.data and a traced map."""
    import nimbus as tf  # pylint: disable=import-outside-toplevel

    def augment(path):
        contents = tf.io.read_file(path)
        offset = tf.cast(tf.random.uniform([2], 0, 128 - 112 + 1), tf.int32)
        window = tf.concat([offset, tf.constant([112, 112], tf.int32)], 0)
        image = tf.image.decode_and_crop_jpeg(contents, window, channels=3)
        image = tf.image.random_flip_left_right(image)
        return (tf.cast(image, tf.float32) / 255.0 - 0.5) / 0.25

    dataset = tf.data.Dataset.list_files(os.path.join(directory, "*.jpg"), seed=1)
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(128, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    start = time.perf_counter()
    images = 0
    for batch in dataset:
        images += batch.shape[0]
    assert batch.shape == (128, 112, 112, 3) and batch.dtype == tf.float32
    assert images == count // 128 * 128
    return images / (time.perf_counter() - start)


def run(command, env=None):
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout


def side_rates(directory, count):
    """{side: command giving its images/s}, each a fresh process."""
    python_env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    me = [sys.executable, os.path.abspath(__file__)]

    def cpp():
        out = run([os.path.join(BUILD, "bench", "bench_data"), str(count), directory, "-1"])
        line = next(l for l in out.splitlines() if l.startswith("nimbus pipeline, AUTOTUNE"))
        return float(line.split("images/s")[0].split()[-1])

    def torch(workers):
        return lambda: float(run([sys.executable, os.path.join(ROOT, "bench", "dataloader_jpeg.py"), directory,
                                  str(count), str(workers)]))

    return {
        "nimbus.data from Python, traced map": lambda: float(run(me + ["--side", directory, str(count)],
                                                                 python_env)),
        "nimbus C++ pipeline (bench_data)": cpp,
        "PyTorch DataLoader, 1 worker": torch(1),
        "PyTorch DataLoader, 2 workers": torch(2),
    }


def main():
    if sys.argv[1:2] == ["--side"]:
        print(f"{nimbus_python_rate(sys.argv[2], int(sys.argv[3])):.1f}")
        return
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    directory = sys.argv[2] if len(sys.argv) > 2 else "/tmp/nimbus-jpegs"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    if not os.path.exists(os.path.join(directory, f"{count - 1}.jpg")):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_jpegs.py"), str(count), directory],
                       check=True)
    sides = side_rates(directory, count)
    names = list(sides)
    rates = {name: [] for name in names}
    for round_index in range(rounds):
        order = names[round_index % len(names):] + names[:round_index % len(names)]
        for name in order:
            rates[name].append(sides[name]())
    print(f"{count} images, {rounds} interleaved rounds; images/s median [min, max]")
    for name in names:
        print(f"  {name:<40} {statistics.median(rates[name]):8.0f} [{min(rates[name]):.0f}, "
              f"{max(rates[name]):.0f}]")
    python_rate = statistics.median(rates[names[0]])
    cpp_rate = statistics.median(rates[names[1]])
    torch_rate = max(statistics.median(rates[names[2]]), statistics.median(rates[names[3]]))
    per_round = [p / c for p, c in zip(rates[names[0]], rates[names[1]])]
    print(f"Python / C++: {python_rate / cpp_rate:.2f} (per round {min(per_round):.2f} to {max(per_round):.2f}; "
          "target >= 0.95)")
    print(f"Python / DataLoader's best: {python_rate / torch_rate:.2f}")


if __name__ == "__main__":
    main()
