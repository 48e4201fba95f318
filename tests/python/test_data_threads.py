"""A traced Dataset.map runs on several pipeline threads at once without the GIL.

How this is observed: each map call reads the monotonic clock (a host step that reads it in C++ when the
step runs, `_data_op("clock")`) before and after a few milliseconds of work, and returns both times
with the element. Meanwhile the main thread holds the GIL, spinning in Python, over a window it times
with the same clock (time.monotonic_ns). A traced map's calls then show intervals that overlap one
another inside that window: they ran while Python ran on the main thread, and at the same time."""
import time

import numpy as np

import nimbus as tf
from nimbus import _nimbus


def clock(after):
    """The monotonic time in ns when this step of the map runs (after the step that made `after`)."""
    return _nimbus._data_op("clock", [after], {})[0]  # pylint: disable=protected-access


def timed(work):
    def fn(x):
        start = clock(x)
        result = work(x)
        return start, clock(result)
    return fn


def traced_work(x):
    # A bilinear resize to 1024 x 1024: milliseconds of C++ per call.
    return tf.image.resize(x, [1024, 1024])


def run(work, hold_gil_seconds):
    """(main thread's GIL window, [(start, end) of each call]) for 48 calls on 4 pipeline threads."""
    image = np.random.default_rng(0).random((64, 64, 3), np.float32)
    dataset = tf.data.Dataset.from_tensors(image).repeat(48).map(timed(work), num_parallel_calls=4)
    dataset = dataset.prefetch(48)
    iterator = iter(dataset)
    first = next(iterator)
    window_start = time.monotonic_ns()
    deadline = time.monotonic() + hold_gil_seconds
    while time.monotonic() < deadline:  # the main thread holds the GIL here, but for Python's switches
        pass
    window_end = time.monotonic_ns()
    calls = [first] + list(iterator)
    return (window_start, window_end), [(int(s), int(e)) for s, e in calls]


def overlapping_pairs(calls):
    return [(a, b) for i, a in enumerate(calls) for b in calls[i + 1:] if a[0] < b[1] and b[0] < a[1]]


def test_traced_map_calls_overlap_while_the_main_thread_holds_the_gil():
    (window_start, window_end), calls = run(traced_work, hold_gil_seconds=1.0)
    inside = [call for call in calls if window_start <= call[0] and call[1] <= window_end]
    assert len(inside) >= 2, f"no map call ran while the main thread held the GIL: {calls}"
    assert overlapping_pairs(inside), f"no two map calls overlapped in time: {inside}"
