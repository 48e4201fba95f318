"""The ops from Python (nimbus.*, nimbus.math, nn, linalg, image, random) and Tensor's operators and
indexing, against NumPy: exact for integers and float64, float32 within the tolerances stated."""
import numpy as np
import pytest

import nimbus as tf

F32 = {"rtol": 1e-6, "atol": 1e-6}  # one float32 rounding of values of order 1
F32_MATH = {"rtol": 1e-5, "atol": 1e-6}  # exp, log, tanh, ... (a few ulps)

rng = np.random.default_rng(22)


def f64(*shape):
    return rng.standard_normal(shape)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i32(*shape, low=-50, high=50):
    return rng.integers(low, high, shape).astype(np.int32)


# ---- elementwise ops and operators ----

BINARY = [
    (tf.add, np.add), (tf.subtract, np.subtract), (tf.multiply, np.multiply), (tf.maximum, np.maximum),
    (tf.minimum, np.minimum), (tf.equal, np.equal), (tf.not_equal, np.not_equal), (tf.less, np.less),
    (tf.less_equal, np.less_equal), (tf.greater, np.greater), (tf.greater_equal, np.greater_equal),
]


@pytest.mark.parametrize("ours, numpy_op", BINARY, ids=[pair[1].__name__ for pair in BINARY])
def test_binary_ops_are_exact_for_int32_and_float64_with_broadcasting(ours, numpy_op):
    for a, b in ((i32(3, 4), i32(4)), (f64(2, 1, 3), f64(4, 1))):
        expected = numpy_op(a, b)
        result = ours(a, b).numpy()
        assert result.dtype == expected.dtype and result.shape == expected.shape
        np.testing.assert_array_equal(result, expected)


def test_divide_and_pow_in_float32_and_integer_true_division():
    a, b = f32(5, 3), np.abs(f32(3)) + 0.5
    np.testing.assert_allclose(tf.divide(a, b).numpy(), a / b, **F32)
    np.testing.assert_allclose(tf.pow(np.abs(a), b).numpy(), np.abs(a) ** b, **F32_MATH)
    quotient = tf.constant([7, -7], dtype=tf.int32) / tf.constant([2, 2], dtype=tf.int32)
    assert quotient.dtype == tf.float64  # TensorFlow's truediv of int32
    np.testing.assert_array_equal(quotient.numpy(), [3.5, -3.5])


UNARY = [
    (tf.negative, np.negative, f64), (tf.abs, np.abs, f64), (tf.square, np.square, f64),
    (tf.sign, np.sign, f64), (tf.exp, np.exp, f64), (tf.sqrt, np.sqrt, lambda *s: np.abs(f64(*s))),
    (tf.math.log, np.log, lambda *s: np.abs(f64(*s)) + 0.1), (tf.tanh, np.tanh, f64), (tf.sin, np.sin, f64),
    (tf.cos, np.cos, f64), (tf.math.rsqrt, lambda x: 1 / np.sqrt(x), lambda *s: np.abs(f64(*s)) + 0.1),
    (tf.sigmoid, lambda x: 1 / (1 + np.exp(-x)), f64), (tf.math.softplus, lambda x: np.log1p(np.exp(x)), f64),
    (tf.nn.relu, lambda x: np.maximum(x, 0), f64),
]


@pytest.mark.parametrize("ours, reference, make", UNARY, ids=[str(i) for i in range(len(UNARY))])
def test_unary_ops_in_float64_and_float32(ours, reference, make):
    x = make(4, 5)
    np.testing.assert_allclose(ours(x).numpy(), reference(x), rtol=1e-12, atol=1e-12)
    x32 = x.astype(np.float32)
    result = ours(x32)
    assert result.dtype == tf.float32
    np.testing.assert_allclose(result.numpy(), reference(x32.astype(np.float64)), **F32_MATH)


def test_gelu_exact_and_tanh_approximation():
    from math import erf, pi, sqrt, tanh  # pylint: disable=import-outside-toplevel
    x = f64(20)
    exact = np.array([0.5 * v * (1 + erf(v / sqrt(2))) for v in x])
    approximate = np.array([0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v ** 3))) for v in x])
    np.testing.assert_allclose(tf.nn.gelu(x).numpy(), exact, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tf.nn.gelu(x, approximate=True).numpy(), approximate, rtol=1e-12, atol=1e-12)


def test_operators_match_numpy_and_mix_with_python_numbers_and_arrays():
    a, b = f64(3, 4), f64(4)
    ta, tb = tf.constant(a), tf.constant(b)
    for result, expected in [
        (ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta / tb, a / b), (abs(ta) ** 2.0, np.abs(a) ** 2),
        (-ta, -a), (abs(ta), np.abs(a)), (2 * ta, 2 * a), (ta - 1, a - 1),
        (1 - ta, 1 - a), (1 / tb, 1 / b), (ta < tb, a < b), (ta <= 0.5, a <= 0.5), (ta > tb, a > b),
        (ta >= tb, a >= b), (ta == ta, a == a), (ta != tb, a != b), (a + tb, a + b), (b * ta, b * a),
    ]:
        assert isinstance(result, tf.Tensor)
        np.testing.assert_array_equal(result.numpy(), expected)
    # Products sum in another order than NumPy's BLAS: equal to float64 rounding.
    np.testing.assert_allclose((ta @ a.T).numpy(), a @ a.T, rtol=1e-12)
    np.testing.assert_allclose((a.T @ ta).numpy(), a.T @ a, rtol=1e-12)


def test_python_numbers_take_the_tensors_dtype():
    x = tf.constant([1.0, 2.0])  # float32
    assert (x + 1).dtype == tf.float32 and (x * 2.5).dtype == tf.float32
    assert (x + np.float64(1)).dtype == tf.float32
    assert (x + np.array([1.0, 2.0])).dtype == tf.float32  # a NumPy array converts like a number
    n = tf.constant([1, 2])  # int32
    assert (n + 1).dtype == tf.int32
    np.testing.assert_array_equal((n * 3).numpy(), [3, 6])
    with pytest.raises(tf.errors.InvalidArgumentError, match="fraction"):
        n + 1.5  # pylint: disable=pointless-statement


def test_bool_operators_and_logical_ops():
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    tp, tq = tf.constant(p), tf.constant(q)
    np.testing.assert_array_equal((tp & tq).numpy(), p & q)
    np.testing.assert_array_equal((tp | tq).numpy(), p | q)
    np.testing.assert_array_equal((~tp).numpy(), ~p)
    np.testing.assert_array_equal(tf.math.logical_xor(tp, tq).numpy(), p ^ q)


def test_variables_take_part_in_operators():
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal((v + 1).numpy(), [[2, 3], [4, 5]])
    np.testing.assert_array_equal((2 * v).numpy(), [[2, 4], [6, 8]])
    np.testing.assert_array_equal((v @ v).numpy(), [[7, 10], [15, 22]])
    np.testing.assert_array_equal(tf.matmul(v, v).numpy(), [[7, 10], [15, 22]])
    np.testing.assert_array_equal(v[1].numpy(), [3, 4])
    assert float(v[0, 1]) == 2.0
    assert {v: 1}[v] == 1  # hashable by identity


def test_numpy_array_on_the_left_gives_a_tensor():
    result = np.ones(3, np.float32) + tf.constant([1.0, 2.0, 3.0])
    assert isinstance(result, tf.Tensor)
    np.testing.assert_array_equal(result.numpy(), [2, 3, 4])
    result = np.ones(3, np.float32) * tf.Variable([1.0, 2.0, 3.0])
    assert isinstance(result, tf.Tensor)


def test_scalar_conversions_follow_tensorflow():
    assert bool(tf.constant(True)) and not bool(tf.constant(0.0))
    assert float(tf.constant(2.5)) == 2.5 and int(tf.constant(7)) == 7
    assert [10, 20, 30][tf.constant(1)] == 20  # __index__ of an integer scalar
    assert f"{tf.constant(0.3):.3f}" == "0.300"
    with pytest.raises(ValueError):
        bool(tf.constant([1.0, 2.0]))
    with pytest.raises(TypeError):
        [1, 2][tf.constant(1.0)]  # pylint: disable=expression-not-assigned
    rows = [row.numpy().tolist() for row in tf.constant([[1, 2], [3, 4]])]
    assert rows == [[1, 2], [3, 4]]


# ---- indexing ----

INDEXES = [
    (1,), (-1,), (slice(1, 3),), (slice(None, None, 2),), (slice(None, None, -1),), (slice(3, 0, -2),),
    (Ellipsis, 1), (1, Ellipsis), (None, 1), (slice(None), None, 2), (Ellipsis, None), (0, 1, 2),
    (slice(-3, -1), slice(None), slice(1, None, 3)), (slice(5, 2),), (1, slice(None, None, -1), -1),
]


@pytest.mark.parametrize("index", INDEXES, ids=[repr(i) for i in INDEXES])
def test_getitem_matches_numpy(index):
    array = np.arange(4 * 3 * 5, dtype=np.int64).reshape(4, 3, 5)
    result = tf.constant(array)[index if len(index) > 1 else index[0]]
    expected = array[index if len(index) > 1 else index[0]]
    assert tuple(result.shape) == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)


def test_getitem_errors_name_the_index_and_shape():
    t = tf.constant(np.zeros((2, 3), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"out of bounds for axis 1 of size 3"):
        t[0, 3]  # pylint: disable=pointless-statement
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"3 entries for a tensor of shape \[2, 3\]"):
        t[0, 0, 0]  # pylint: disable=pointless-statement
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot index"):
        t[[0, 1]]  # pylint: disable=pointless-statement


# ---- creation, shapes, reductions ----

def test_creation_ops():
    np.testing.assert_array_equal(tf.zeros([2, 3]).numpy(), np.zeros((2, 3), np.float32))
    assert tf.ones((2,), dtype=tf.int64).dtype == tf.int64
    np.testing.assert_array_equal(tf.fill([2, 2], 7).numpy(), np.full((2, 2), 7, np.int32))
    like = tf.constant(np.ones((2, 3), np.float64))
    assert tf.zeros_like(like).dtype == tf.float64 and tf.ones_like(like, dtype=tf.int32).dtype == tf.int32
    np.testing.assert_array_equal(tf.range(5).numpy(), np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(tf.range(1, 10, 3).numpy(), [1, 4, 7])
    assert tf.range(0.0, 1.0, 0.25).dtype == tf.float32
    np.testing.assert_array_equal(tf.eye(3, 4).numpy(), np.eye(3, 4, dtype=np.float32))
    np.testing.assert_array_equal(tf.constant(5.0, shape=[2, 2]).numpy(), np.full((2, 2), 5, np.float32))
    np.testing.assert_array_equal(tf.constant([1, 2, 3, 4], shape=[2, 2]).numpy(), [[1, 2], [3, 4]])
    np.testing.assert_allclose(tf.linspace(0.0, 1.0, 5).numpy(), np.linspace(0, 1, 5), **F32)


def test_cast_rounds_and_truncates_as_tensorflow():
    x = np.array([1.7, -1.7, 2.5], np.float32)
    np.testing.assert_array_equal(tf.cast(x, tf.int32).numpy(), [1, -1, 2])
    np.testing.assert_array_equal(tf.cast(tf.constant([0, 3]), tf.bool).numpy(), [False, True])


def test_shape_ops_match_numpy():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    np.testing.assert_array_equal(tf.reshape(a, [4, -1]).numpy(), a.reshape(4, -1))
    np.testing.assert_array_equal(tf.transpose(a).numpy(), a.transpose())
    np.testing.assert_array_equal(tf.transpose(a, [1, 0, 2]).numpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(tf.concat([a, a], axis=1).numpy(), np.concatenate([a, a], 1))
    np.testing.assert_array_equal(tf.stack([a, a], axis=-1).numpy(), np.stack([a, a], -1))
    assert [t.numpy().tolist() for t in tf.unstack(a[0], axis=1)] == a[0].T.tolist()
    np.testing.assert_array_equal(tf.squeeze(np.zeros((1, 3, 1))).numpy(), np.zeros(3))
    assert tf.expand_dims(a, 1).shape == (2, 1, 3, 4)
    parts = tf.split(a, [1, 3], axis=2)
    np.testing.assert_array_equal(parts[1].numpy(), a[:, :, 1:])
    assert len(tf.split(a, 2, axis=2)) == 2
    np.testing.assert_array_equal(tf.slice(a, [0, 1, 1], [-1, 2, 2]).numpy(), a[:, 1:3, 1:3])
    np.testing.assert_array_equal(tf.pad(a[0], [[1, 0], [0, 2]], constant_values=9).numpy(),
                                  np.pad(a[0], [[1, 0], [0, 2]], constant_values=9))
    np.testing.assert_array_equal(tf.tile(a[0], [2, 1]).numpy(), np.tile(a[0], [2, 1]))
    np.testing.assert_array_equal(tf.broadcast_to([1, 2], [3, 2]).numpy(), np.broadcast_to([1, 2], (3, 2)))
    np.testing.assert_array_equal(tf.reverse(a, [0, 2]).numpy(), a[::-1, :, ::-1])
    np.testing.assert_array_equal(tf.shape(a).numpy(), [2, 3, 4])
    assert int(tf.size(a)) == 24 and int(tf.rank(a)) == 3


def test_gather_one_hot_where_and_segments():
    params = f64(5, 3)
    np.testing.assert_array_equal(tf.gather(params, [4, 0, 4]).numpy(), params[[4, 0, 4]])
    np.testing.assert_array_equal(tf.gather(params, [[2], [1]], axis=1).numpy(), params[:, [[2], [1]]])
    np.testing.assert_array_equal(tf.nn.embedding_lookup(params, [1]).numpy(), params[[1]])
    np.testing.assert_array_equal(tf.one_hot([0, 2], 3).numpy(), np.eye(3, dtype=np.float32)[[0, 2]])
    np.testing.assert_array_equal(tf.one_hot([0, 2], 3, axis=0).numpy(), np.eye(3, dtype=np.float32)[[0, 2]].T)
    assert tf.one_hot([1], 2, on_value=5, off_value=-1).numpy().tolist() == [[-1, 5]]
    cond = params > 0
    np.testing.assert_array_equal(tf.where(cond, params, 0.0).numpy(), np.where(params > 0, params, 0))
    np.testing.assert_array_equal(tf.math.unsorted_segment_sum(params, [0, 2, 0, 1, 2], 3).numpy(),
                                  [params[[0, 2]].sum(0), params[3], params[[1, 4]].sum(0)])


@pytest.mark.parametrize("axis", [None, 0, 1, [0, 2], -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(axis, keepdims):
    x = f64(3, 4, 5)
    numpy_axis = tuple(axis) if isinstance(axis, list) else axis
    for ours, theirs in [(tf.reduce_sum, np.sum), (tf.reduce_mean, np.mean), (tf.reduce_max, np.max),
                         (tf.reduce_min, np.min), (tf.math.reduce_variance, np.var), (tf.math.reduce_std, np.std)]:
        np.testing.assert_allclose(ours(x, axis=axis, keepdims=keepdims).numpy(),
                                   theirs(x, axis=numpy_axis, keepdims=keepdims), rtol=1e-12, atol=1e-12)
    integers = i32(3, 4, 5)
    np.testing.assert_array_equal(tf.reduce_sum(integers, axis=axis, keepdims=keepdims).numpy(),
                                  np.sum(integers, axis=numpy_axis, keepdims=keepdims))
    np.testing.assert_allclose(tf.reduce_logsumexp(x, axis=axis, keepdims=keepdims).numpy(),
                               np.log(np.sum(np.exp(x), axis=numpy_axis, keepdims=keepdims)), rtol=1e-12)


def test_argmax_argmin_any_all_and_top_k():
    x = f64(4, 6)
    assert tf.argmax(x).dtype == tf.int64
    np.testing.assert_array_equal(tf.argmax(x).numpy(), np.argmax(x, 0))  # TensorFlow's default axis is 0
    np.testing.assert_array_equal(tf.argmax(x, axis=1, output_type=tf.int32).numpy(), np.argmax(x, 1))
    np.testing.assert_array_equal(tf.argmin(x, axis=1).numpy(), np.argmin(x, 1))
    b = x > 0
    np.testing.assert_array_equal(tf.reduce_any(b, axis=1).numpy(), b.any(1))
    np.testing.assert_array_equal(tf.reduce_all(b, axis=0).numpy(), b.all(0))
    values, indices = tf.math.top_k(x, k=2)
    assert indices.dtype == tf.int32
    np.testing.assert_array_equal(indices.numpy(), np.argsort(-x, axis=1)[:, :2])
    np.testing.assert_array_equal(values.numpy(), -np.sort(-x, axis=1)[:, :2])


def test_matmul_add_n_clip_and_linalg():
    a, b = f64(2, 3, 4), f64(2, 5, 4)
    np.testing.assert_allclose(tf.matmul(a, b, transpose_b=True).numpy(), a @ b.transpose(0, 2, 1), rtol=1e-12)
    np.testing.assert_allclose(tf.linalg.matmul(a, a, transpose_a=True).numpy(), a.transpose(0, 2, 1) @ a,
                               rtol=1e-12)
    x32, y32 = f32(64, 64), f32(64, 64)  # the small-matmul (sgemm) path, float32 sums of 64 products
    np.testing.assert_allclose(tf.matmul(x32, y32).numpy(), x32.astype(np.float64) @ y32, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tf.matmul(x32, y32, transpose_a=True).numpy(), x32.T.astype(np.float64) @ y32,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(tf.add_n([a, a, a]).numpy(), a + a + a)
    np.testing.assert_array_equal(tf.clip_by_value(a, -0.5, 0.5).numpy(), np.clip(a, -0.5, 0.5))
    np.testing.assert_array_equal(tf.clip_by_value(a, tf.constant(-0.5, tf.float64), 0.5).numpy(),
                                  np.clip(a, -0.5, 0.5))
    m = f64(4, 4)
    np.testing.assert_array_equal(tf.linalg.band_part(m, 1, 0).numpy(), np.tril(np.triu(m, -1)))
    np.testing.assert_array_equal(tf.linalg.band_part(m, -1, 0).numpy(), np.tril(m))
    np.testing.assert_allclose(tf.linalg.norm(m).numpy(), np.linalg.norm(m), rtol=1e-12)
    np.testing.assert_allclose(tf.linalg.trace(m).numpy(), np.trace(m), rtol=1e-12)
    np.testing.assert_array_equal(tf.linalg.matrix_transpose(a).numpy(), a.transpose(0, 2, 1))


# ---- nn ----

def test_softmax_and_cross_entropy_against_numpy():
    logits = f64(6, 5)
    labels = rng.integers(0, 5, 6)
    shifted = logits - logits.max(1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    np.testing.assert_allclose(tf.nn.softmax(logits).numpy(), np.exp(log_softmax), rtol=1e-12)
    np.testing.assert_allclose(tf.nn.log_softmax(logits).numpy(), log_softmax, rtol=1e-12)
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    np.testing.assert_allclose(sparse.numpy(), -log_softmax[np.arange(6), labels], rtol=1e-12)
    batched = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels.reshape(2, 3),
                                                             logits=logits.reshape(2, 3, 5))
    np.testing.assert_allclose(batched.numpy(), sparse.numpy().reshape(2, 3), rtol=1e-12)
    probabilities = np.exp(f64(6, 5))
    probabilities /= probabilities.sum(1, keepdims=True)
    dense = tf.nn.softmax_cross_entropy_with_logits(labels=probabilities, logits=logits)
    np.testing.assert_allclose(dense.numpy(), -(probabilities * log_softmax).sum(1), rtol=1e-12)
    z = (f64(6) > 0).astype(np.float64)
    x = f64(6) * 5
    np.testing.assert_allclose(tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x).numpy(),
                               -(z * np.log(1 / (1 + np.exp(-x))) + (1 - z) * np.log(1 - 1 / (1 + np.exp(-x)))),
                               rtol=1e-9)


def test_activations_made_of_ops():
    x = f64(50) * 4
    np.testing.assert_array_equal(tf.nn.relu6(x).numpy(), np.clip(x, 0, 6))
    np.testing.assert_array_equal(tf.nn.leaky_relu(x, 0.1).numpy(), np.where(x > 0, x, 0.1 * x))
    np.testing.assert_allclose(tf.nn.elu(x).numpy(), np.where(x > 0, x, np.exp(x) - 1), rtol=1e-12)
    np.testing.assert_allclose(tf.nn.silu(x).numpy(), x / (1 + np.exp(-x)), rtol=1e-12)
    np.testing.assert_allclose(tf.nn.softsign(x).numpy(), x / (1 + np.abs(x)), rtol=1e-12)
    np.testing.assert_allclose(tf.nn.l2_normalize(x).numpy(), x / np.linalg.norm(x), rtol=1e-12)
    np.testing.assert_allclose(tf.nn.l2_loss(x).numpy(), (x ** 2).sum() / 2, rtol=1e-12)


def conv2d_reference(x, w, stride, padding):
    """NHWC cross-correlation with TensorFlow's SAME rule, in float64 loops."""
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-wd // stride)
        ph = max((oh - 1) * stride + kh - h, 0)
        pw = max((ow - 1) * stride + kw - wd, 0)
        x = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)])
    else:
        oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, f))
    for i in range(oh):
        for j in range(ow):
            window = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(window, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


@pytest.mark.parametrize("stride, padding", [(1, "SAME"), (2, "VALID"), (2, "SAME")])
def test_conv2d_and_pooling_against_loops(stride, padding):
    x, w = f64(2, 7, 6, 3), f64(3, 3, 3, 4)
    np.testing.assert_allclose(tf.nn.conv2d(x, w, strides=stride, padding=padding).numpy(),
                               conv2d_reference(x, w, stride, padding), rtol=1e-10, atol=1e-10)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    np.testing.assert_allclose(tf.nn.conv2d(x32, w32, strides=[1, stride, stride, 1], padding=padding).numpy(),
                               conv2d_reference(x32.astype(np.float64), w32, stride, padding), rtol=1e-4, atol=1e-5)
    pooled = tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID").numpy()
    np.testing.assert_array_equal(pooled, x[:, :6, :6, :].reshape(2, 3, 2, 3, 2, 3).max(axis=(2, 4)))
    averaged = tf.nn.avg_pool2d(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID").numpy()
    np.testing.assert_allclose(averaged, x[:, :6, :6, :].reshape(2, 3, 2, 3, 2, 3).mean(axis=(2, 4)), rtol=1e-12)


def test_bias_add_moments_and_batch_normalization():
    x, bias = f64(2, 3, 4), f64(4)
    np.testing.assert_array_equal(tf.nn.bias_add(x, bias).numpy(), x + bias)
    np.testing.assert_array_equal(tf.nn.bias_add(x, f64(3)[:3], data_format="NCHW").shape, (2, 3, 4))
    mean, variance = tf.nn.moments(x, axes=[0, 1])
    np.testing.assert_allclose(mean.numpy(), x.mean((0, 1)), rtol=1e-12)
    np.testing.assert_allclose(variance.numpy(), x.var((0, 1)), rtol=1e-12)
    normalized = tf.nn.batch_normalization(x, mean, variance, offset=1.0, scale=2.0, variance_epsilon=1e-3)
    np.testing.assert_allclose(normalized.numpy(), (x - x.mean((0, 1))) / np.sqrt(x.var((0, 1)) + 1e-3) * 2 + 1,
                               rtol=1e-12)


def test_dropout_keeps_the_expected_share_and_scales():
    x = np.ones((100, 100), np.float32)
    y = tf.nn.dropout(x, rate=0.25, seed=3).numpy()
    kept = y != 0
    assert 0.72 < kept.mean() < 0.78
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.nn.dropout(x, rate=1.0)


# ---- random ----

def test_random_seeds_follow_tensorflow():
    tf.random.set_seed(7)
    first = tf.random.normal([1000], seed=1).numpy()
    second = tf.random.normal([1000], seed=1).numpy()
    assert not np.array_equal(first, second)  # an op seed's stream continues across calls
    tf.random.set_seed(7)
    np.testing.assert_array_equal(tf.random.normal([1000], seed=1).numpy(), first)  # and restarts at set_seed
    assert abs(first.mean()) < 0.15 and 0.85 < first.std() < 1.15
    uniform = tf.random.uniform([1000], minval=2, maxval=3, seed=2).numpy()
    assert uniform.min() >= 2 and uniform.max() < 3
    integers = tf.random.uniform([1000], minval=-3, maxval=3, dtype=tf.int32).numpy()
    assert integers.dtype == np.int32 and set(integers.tolist()) == set(range(-3, 3))


# ---- image ----

def test_image_ops():
    image = rng.integers(0, 256, (6, 8, 3)).astype(np.uint8)
    np.testing.assert_array_equal(tf.image.flip_left_right(image).numpy(), image[:, ::-1])
    np.testing.assert_array_equal(tf.image.flip_up_down(image[None]).numpy(), image[None, ::-1])
    np.testing.assert_array_equal(tf.image.crop_to_bounding_box(image, 1, 2, 3, 4).numpy(), image[1:4, 2:6])
    crop = tf.image.random_crop(image, [4, 4, 3], seed=5).numpy()
    assert any(np.array_equal(crop, image[i:i + 4, j:j + 4]) for i in range(3) for j in range(5))
    as_float = tf.image.convert_image_dtype(image, tf.float32)
    np.testing.assert_allclose(as_float.numpy(), image / 255, **F32)
    np.testing.assert_array_equal(tf.image.convert_image_dtype(as_float, tf.uint8).numpy(), image)
    x = image.astype(np.float64)
    standardized = tf.image.per_image_standardization(x).numpy()
    np.testing.assert_allclose(standardized, (x - x.mean()) / x.std(), rtol=1e-10)
    resized = tf.image.resize(image, [12, 16]).numpy()
    assert resized.shape == (12, 16, 3) and resized.dtype == np.float32
    same = tf.image.resize(image.astype(np.float32), [6, 8]).numpy()  # same size: the pixels themselves
    np.testing.assert_allclose(same, image, **F32)
    assert tf.image.resize(np.stack([image, image]), [3, 4]).shape == (2, 3, 4, 3)


# ---- errors ----

def test_bad_shapes_raise_invalid_argument_naming_the_shapes():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[2, 3\].*\[4, 5\]"):
        tf.matmul(np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[3\].*\[4\]"):
        tf.constant(np.zeros(3, np.float32)) + tf.constant(np.zeros(4, np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[2, 3\]"):
        tf.reshape(np.zeros((2, 3), np.float32), [4, 2])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.add(tf.constant([1.0]), tf.constant([1], dtype=tf.int32))  # no silent promotion
    with pytest.raises(tf.errors.UnimplementedError):
        tf.where([True, False])
    with pytest.raises(TypeError):
        tf.constant([1.0]) // 2  # pylint: disable=expression-not-assigned
