"""The JPEG input pipeline three ways, in one run: nimbus.data from Python with a traced map, the same
pipeline in C++ (bench/bench_data, AUTOTUNE), and PyTorch's DataLoader (bench/dataloader_jpeg.py, 1 and
2 workers: its best on this machine is the larger of the two). The work per image is the same: read the
file, decode only a random 112x112 window of the 128x128 JPEG, random flip, to float, normalize
(mean 0.5, std 0.25), batch 128. Each side runs as its own process, ROUNDS times, the order rotating
every round; each side's median images/s is printed with its range. Run it on a quiet machine.

Both Nimbus sides make two passes over the files in their process, each with a new iterator, and
report both: the second is an epoch's rate in training, the first also carries the process's start
(the C++ side has decoded every file on one thread before its first pass; the Python side has just
imported nimbus and NumPy, whose OpenBLAS threads spin for about 0.1 s after loading). DataLoader's
one pass includes its workers' start.

    /usr/bin/python3 bench/python/jpeg_pipeline.py [COUNT=20000] [DIR=/tmp/nimbus-jpegs] [ROUNDS=5]

The files come from bench/make_jpegs.py (as bench/jpeg_pipeline.sh makes them); the build from
build/release (targets nimbus_python and bench_data).
"""
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "release")


def nimbus_python_rates(directory, count):
    """This process's side: [(images/s, us of CPU per image)] of two passes over the pipeline built with
    nimbus.data and a traced map."""
    import nimbus as tf  # pylint: disable=import-outside-toplevel

    def augment(path):
        contents = tf.io.read_file(path)
        offset = tf.cast(tf.random.uniform([2], 0, 128 - 112 + 1), tf.int32)
        window = tf.concat([offset, tf.constant([112, 112], tf.int32)], 0)
        image = tf.image.decode_and_crop_jpeg(contents, window, channels=3)
        image = tf.image.random_flip_left_right(image)
        # (x / 255 - 0.5) / 0.25 as bench_data's normalize computes it: x * scale + shift.
        return tf.cast(image, tf.float32) * (1 / (255 * 0.25)) - 0.5 / 0.25

    dataset = tf.data.Dataset.list_files(os.path.join(directory, "*.jpg"), seed=1)
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(128, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    rates = []
    for _ in range(2):
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        images = 0
        for batch in dataset:
            images += batch.shape[0]
        assert batch.shape == (128, 112, 112, 3) and batch.dtype == tf.float32
        assert images == count // 128 * 128
        rates.append((images / (time.perf_counter() - start), (_cpu_seconds() - cpu_start) / images * 1e6))
    return rates


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(command, env=None):
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout


def side_rates(directory, count):
    """{side: function giving [(images/s, us of CPU per image)] per pass}, each run in a fresh process."""
    python_env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))

    def python():
        out = run([sys.executable, os.path.abspath(__file__), "--side", directory, str(count)], python_env)
        return [tuple(float(v) for v in line.split()) for line in out.splitlines()]

    def cpp():
        out = run([os.path.join(BUILD, "bench", "bench_data"), str(count), directory, "-1,-1"])
        lines = [l for l in out.splitlines() if l.startswith("nimbus pipeline, AUTOTUNE")]
        return [(float(l.split("images/s")[0].split()[-1]), float(l.split("; ")[1].split()[0])) for l in lines]

    def torch(workers):
        # dataloader_jpeg.py prints images/s only; its CPU is spread over worker processes.
        return lambda: [(float(run([sys.executable, os.path.join(ROOT, "bench", "dataloader_jpeg.py"), directory,
                                    str(count), str(workers)])), float("nan"))]

    sides = {"nimbus.data from Python, traced map": python, "nimbus C++ pipeline (bench_data)": cpp}
    if importlib.util.find_spec("torchvision") is None:
        print("PyTorch DataLoader: skipped, torchvision is not installed (python3-torchvision)")
    else:
        sides["PyTorch DataLoader, 1 worker"] = torch(1)
        sides["PyTorch DataLoader, 2 workers"] = torch(2)
    return sides


def summary(runs):
    """'median [min, max]' of images/s over the rounds, and of CPU per image where measured."""
    rates = [rate for rate, _ in runs]
    cpus = [cpu for _, cpu in runs]
    text = f"{statistics.median(rates):8.0f} [{min(rates):.0f}, {max(rates):.0f}] images/s"
    if cpus[0] == cpus[0]:  # not NaN
        text += f", {statistics.median(cpus):.0f} [{min(cpus):.0f}, {max(cpus):.0f}] us of CPU per image"
    return text


def main():
    if sys.argv[1:2] == ["--side"]:
        for rate, cpu_per_image in nimbus_python_rates(sys.argv[2], int(sys.argv[3])):
            print(f"{rate:.1f} {cpu_per_image:.1f}")
        return
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    directory = sys.argv[2] if len(sys.argv) > 2 else "/tmp/nimbus-jpegs"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    if not os.path.exists(os.path.join(directory, f"{count - 1}.jpg")):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_jpegs.py"), str(count), directory],
                       check=True)
    sides = side_rates(directory, count)
    names = list(sides)
    results = {name: [] for name in names}  # per round, per pass
    for round_index in range(rounds):
        order = names[round_index % len(names):] + names[:round_index % len(names)]
        for name in order:
            results[name].append(sides[name]())
    print(f"{count} images, {rounds} interleaved rounds; median [min, max]")
    for name in names:
        for index in range(len(results[name][0])):
            label = name if len(results[name][0]) == 1 else f"{name}, pass {index + 1}"
            print(f"  {label:<48} {summary([passes[index] for passes in results[name]])}")
    python, cpp = ([passes for passes in results[name]] for name in names[:2])
    for index, what in ((1, "second pass (an epoch's rate; target >= 0.95)"), (0, "first pass (with the start)")):
        python_rates, cpp_rates = ([passes[index][0] for passes in side] for side in (python, cpp))
        per_round = [p / c for p, c in zip(python_rates, cpp_rates)]
        print(f"Python / C++ images/s, {what}: "
              f"{statistics.median(python_rates) / statistics.median(cpp_rates):.2f} "
              f"(per round {min(per_round):.2f} to {max(per_round):.2f})")
    if len(names) > 2:
        best_torch = max(statistics.median([passes[0][0] for passes in results[name]]) for name in names[2:])
        python_second = statistics.median([passes[1][0] for passes in python])
        print(f"Python's second pass / DataLoader's best: {python_second / best_torch:.2f}")


if __name__ == "__main__":
    main()
