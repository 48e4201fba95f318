"""A traced Dataset.map runs on several pipeline threads at once without the GIL.

How this is observed: each map call reads the monotonic clock (a host step that reads it in C++ when the
step runs, `_data_op("clock")`) before and after some milliseconds of work, and returns both times with
the element. Meanwhile the main thread holds the GIL for a whole second, spinning in Python with the
interpreter's forced switches turned off (sys.setswitchinterval), over a window it times with the same
clock (time.monotonic_ns). Code that needs the GIL cannot run in that window. A traced map's calls
still start and end inside it, two of them overlapping in time; the same map with its work in a
nimbus.py_function (which needs the GIL) has no call inside it: the control that shows the window
really excludes Python."""
import sys
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


def python_work(x):
    return tf.py_function(lambda image: tf.image.resize(image, [1024, 1024]), [x], tf.float32)


def run(work):
    """(the main thread's GIL window, [(start, end) of each call]) for 48 calls on 4 pipeline threads."""
    image = np.random.default_rng(0).random((64, 64, 3), np.float32)
    dataset = tf.data.Dataset.from_tensors(image).repeat(48).map(timed(work), num_parallel_calls=4)
    iterator = iter(dataset.prefetch(48))
    first = next(iterator)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)  # no forced switch: the main thread keeps the GIL until it blocks
    try:
        time.sleep(0.05)  # threads already waiting for the GIL timed their wait with the old interval
        window_start = time.monotonic_ns()
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            pass
        window_end = time.monotonic_ns()
    finally:
        sys.setswitchinterval(interval)
    calls = [first] + list(iterator)
    return (window_start, window_end), [(int(s), int(e)) for s, e in calls]


def inside(window, calls):
    return [call for call in calls if window[0] <= call[0] and call[1] <= window[1]]


def overlapping_pairs(calls):
    return [(a, b) for i, a in enumerate(calls) for b in calls[i + 1:] if a[0] < b[1] and b[0] < a[1]]


def test_traced_map_calls_overlap_while_the_main_thread_holds_the_gil():
    window, calls = run(traced_work)
    assert len(calls) == 48
    during = inside(window, calls)
    assert len(during) >= 2, f"no map call ran while the main thread held the GIL: {calls}"
    assert overlapping_pairs(during), f"no two map calls overlapped in time: {during}"


def test_py_function_calls_wait_for_the_gil():
    window, calls = run(python_work)
    assert len(calls) == 48
    assert not inside(window, calls), "a map call that needs the GIL ran while the main thread held it"
