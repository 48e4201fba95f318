"""nimbus.function as TensorFlow's guides use tf.function: results equal to eager ones, retracing on new
shapes, dtypes and Python values (with the retrace warnings) and not otherwise, input_signature,
jit_compile and the global JIT switch, trace-time Python side effects, errors naming the op,
run_functions_eagerly, and the GIL released while a graph runs."""
import sys
import threading

import numpy as np
import pytest

import nimbus as tf


@pytest.fixture(name="mlp")
def fixture_mlp():
    return tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(8,)),
                                tf.keras.layers.Dense(4)])


def batch(rows, features=8, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, features)).astype(np.float32)


def test_graph_results_equal_eager_ones_bit_for_bit_without_fusion(mlp):
    x = batch(16)
    graph = tf.function(lambda x: mlp(x), jit_compile=False)  # pylint: disable=unnecessary-lambda
    np.testing.assert_array_equal(graph(x).numpy(), mlp(x).numpy())


def test_jit_compile_fuses_and_stays_within_tolerance(mlp):
    x = batch(16)

    @tf.function(jit_compile=True)
    def fused(x):
        return mlp(x)

    np.testing.assert_allclose(fused(x).numpy(), mlp(x).numpy(), rtol=1e-5, atol=1e-6)
    assert "fused_matmul" in fused.get_concrete_function(x).graph_text()
    unfused = tf.function(lambda x: mlp(x), jit_compile=False)  # pylint: disable=unnecessary-lambda
    assert "fused" not in unfused.get_concrete_function(x).graph_text()


def test_set_jit_is_the_default_of_functions_without_jit_compile(mlp):
    x = batch(4)
    assert tf.config.optimizer.get_jit() == "autoclustering"
    try:
        tf.config.optimizer.set_jit(False)
        assert tf.config.optimizer.get_jit() == ""
        assert "fused" not in tf.function(lambda x: mlp(x)).get_concrete_function(x).graph_text()
        tf.config.optimizer.set_jit(True)
        assert "fused_matmul" in tf.function(lambda x: mlp(x)).get_concrete_function(x).graph_text()
    finally:
        tf.config.optimizer.set_jit(True)
    with pytest.raises(ValueError, match="set_jit"):
        tf.config.optimizer.set_jit("xla")


def test_nested_arguments_and_results_keep_their_structure(mlp):
    x, y = batch(2), batch(3)

    @tf.function
    def f(inputs, scale):
        return {"first": mlp(inputs["a"]), "pair": (None, [mlp(inputs["b"][0])]), "scale": scale}

    result = f({"a": x, "b": [tf.constant(y)]}, 2.0)
    assert set(result) == {"first", "pair", "scale"} and result["pair"][0] is None
    np.testing.assert_array_equal(result["first"].numpy(), tf.function(mlp.__call__)(x).numpy())
    assert result["pair"][1][0].shape == (3, 4)
    assert result["scale"].numpy() == np.float32(2.0), "a returned Python number comes back as a tensor"


def test_new_shapes_and_dtypes_retrace_and_the_same_ones_do_not(mlp):
    @tf.function
    def f(x):
        return mlp(x)

    f(batch(4))
    f(batch(4, seed=1))
    assert f.experimental_get_tracing_count() == 1
    f(batch(5))
    assert f.experimental_get_tracing_count() == 2
    f(batch(4, seed=2))
    assert f.experimental_get_tracing_count() == 2
    square = tf.function(lambda t: tf.square(t))  # pylint: disable=unnecessary-lambda
    square(np.ones(3, np.float32))
    square(np.ones(3, np.float64))
    assert square.experimental_get_tracing_count() == 2


def test_python_values_are_part_of_the_trace():
    seen = []

    @tf.function
    def f(x, power):
        seen.append(power)
        return x * float(power)

    x = tf.constant(np.ones(2, np.float32))
    np.testing.assert_array_equal(f(x, 2).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(f(x, 3).numpy(), [3.0, 3.0])
    f(x, 2)
    f(x, 2.0)  # a float is another key than the int, as in TensorFlow
    assert seen == [2, 3, 2.0] and f.experimental_get_tracing_count() == 3


def test_python_side_effects_run_only_while_tracing(mlp):
    calls = []

    @tf.function
    def f(x):
        calls.append("traced")
        return mlp(x)

    for seed in range(3):
        f(batch(4, seed=seed))
    assert calls == ["traced"]


def test_variables_are_captured_and_updates_run_in_the_graph():
    counter = tf.Variable(np.zeros(2, np.float32))

    @tf.function
    def step(delta):
        counter.assign_add(delta)
        return counter.read_value() * 2.0

    for _ in range(3):
        doubled = step(np.ones(2, np.float32))
    np.testing.assert_array_equal(counter.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(doubled.numpy(), [6.0, 6.0])
    assert step.experimental_get_tracing_count() == 1


def test_a_gradient_tape_inside_a_function_gives_the_eager_gradients(mlp):
    x = batch(8)

    def gradients(x):
        with tf.GradientTape() as tape:
            y = mlp(x, training=True)
        return tape.gradient(y, mlp.trainable_variables)

    traced = tf.function(gradients, jit_compile=False)(x)
    for graph_grad, eager_grad in zip(traced, gradients(x)):
        np.testing.assert_array_equal(graph_grad.numpy(), eager_grad.numpy())


def test_input_signature_with_a_none_dimension_traces_once(mlp):
    calls = []

    @tf.function(input_signature=[tf.TensorSpec(shape=[None, 8], dtype=tf.float32)])
    def f(x):
        calls.append(1)
        return mlp(x)

    for rows in (4, 4, 7, 2):
        np.testing.assert_allclose(f(batch(rows)).numpy(), mlp(batch(rows)).numpy(), rtol=1e-5, atol=1e-6)
    assert f.experimental_get_tracing_count() == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expects inputs \(f32\[\?, 8\]\)"):
        f(np.ones((4, 8), np.float64))
    with pytest.raises(TypeError, match="do not match the input_signature"):
        f(batch(4), batch(4))


def test_retracing_many_shapes_gives_the_engines_warning(capfd):
    @tf.function
    def f(x):
        return x * 2.0

    for rows in range(1, 8):
        f(np.ones((rows, 2), np.float32))
    assert f.experimental_get_tracing_count() == 7
    assert "function 'f' has traced 6 signatures" in capfd.readouterr().err


def test_retracing_many_python_values_warns():
    @tf.function
    def f(x, k):
        return x * float(k)

    with pytest.warns(RuntimeWarning, match="traced for its 6th set of Python arguments"):
        for k in range(6):
            f(tf.constant(np.ones(2, np.float32)), k)


def test_errors_inside_a_traced_function_name_the_op():
    dense = tf.keras.layers.Dense(3)
    dense(np.ones((2, 8), np.float32))

    @tf.function
    def f(x):
        return dense(x)

    with pytest.raises(tf.errors.InvalidArgumentError, match="matmul"):
        f(np.ones((2, 5), np.float32))
    with pytest.raises(ZeroDivisionError):
        tf.function(lambda x: x * (1 / 0))(np.ones(2, np.float32))


def test_run_functions_eagerly_runs_the_python_each_call(mlp):
    calls = []

    @tf.function
    def f(x):
        calls.append(1)
        return mlp(x)

    try:
        tf.config.run_functions_eagerly(True)
        assert tf.config.functions_run_eagerly()
        f(batch(2))
        f(batch(2))
        assert calls == [1, 1] and f.experimental_get_tracing_count() == 0
    finally:
        tf.config.run_functions_eagerly(False)
    assert not tf.config.functions_run_eagerly()
    f(batch(2))
    f(batch(2))
    assert calls == [1, 1, 1]


def test_methods_trace_per_instance():
    class Scaler:
        def __init__(self, factor):
            self.factor = factor

        @tf.function
        def __call__(self, x):
            return x * self.factor

    x = tf.constant(np.ones(2, np.float32))
    np.testing.assert_array_equal(Scaler(2.0)(x).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(Scaler(3.0)(x).numpy(), [3.0, 3.0])


def test_a_running_graph_releases_the_gil():
    """While one thread runs a graph, another runs Python (a huge switch interval means the GIL would
    otherwise pass only when the graph's thread finishes)."""
    layers = [tf.keras.layers.Dense(512, activation="relu", input_shape=(512,)) for _ in range(12)]
    model = tf.keras.Sequential(layers)
    x = batch(512, features=512)
    f = tf.function(lambda x: model(x))  # pylint: disable=unnecessary-lambda
    f(x)  # traced here, with the GIL
    started, state = threading.Event(), {"finished": False}

    def run_graph():
        started.set()
        f(x)
        state["finished"] = True

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        worker = threading.Thread(target=run_graph)
        worker.start()
        started.wait()
        finished_when_this_thread_ran = state["finished"]
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert not finished_when_this_thread_ran, "this thread ran only after the graph finished: the GIL was held"
