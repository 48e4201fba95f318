"""``nimbus.linalg``: TensorFlow's tf.linalg over the engine's ops (matmul through oneDNN on the CPU)."""
from nimbus import _nimbus
from nimbus._nimbus import band_part, matmul, matrix_transpose
from nimbus.array_ops import eye
from nimbus.errors import UnimplementedError
from nimbus.math import l2_normalize

adjoint = matrix_transpose  # the same for the real dtypes Nimbus has


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):  # pylint: disable=redefined-builtin,unused-argument
    """The Euclidean (Frobenius) norm over ``axis`` (all axes when None)."""
    if ord not in ("euclidean", "fro", 2) or (ord == 2 and axis is None):
        raise UnimplementedError(f"norm(ord={ord!r}): only the Euclidean norm", "use ord='euclidean'")
    return _nimbus.sqrt(_nimbus.reduce_sum(_nimbus.square(tensor), axis=axis, keepdims=bool(keepdims)))


def trace(x, name=None):  # pylint: disable=unused-argument
    """The sum of the main diagonal of the last two axes."""
    x = _nimbus.constant(x)
    rows, columns = x.shape[-2], x.shape[-1]
    return _nimbus.reduce_sum(x * eye(rows, columns, dtype=x.dtype), axis=[-2, -1])


__all__ = ["adjoint", "band_part", "eye", "l2_normalize", "matmul", "matrix_transpose", "norm", "trace"]
