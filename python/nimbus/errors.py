"""Exceptions under TensorFlow's names (``tf.errors``).

Every failure the engine reports arrives as one of these, carrying the engine's
message and, where there is one, a hint saying what to do about it.
"""


class OpError(Exception):
    """The base class of every error the engine raises (``tf.errors.OpError``)."""

    def __init__(self, message, hint=""):
        self.message = message
        self.hint = hint
        super().__init__(f"{message}\n  hint: {hint}" if hint else message)


class InvalidArgumentError(OpError):
    """A bad argument: a wrong shape, dtype, axis, key or value."""


class ResourceExhaustedError(OpError):
    """A device or host allocation could not be served."""


class DataLossError(OpError):
    """A file or record is malformed: truncated, a bad checksum, a wrong magic number."""


class NotFoundError(OpError):
    """A file, key, op or device that does not exist."""


class UnavailableError(OpError):
    """Something this machine or build lacks: no GPU driver, no CUDA backend."""


class UnimplementedError(OpError):
    """A valid request the engine does not support."""


class InternalError(OpError):
    """A broken invariant inside the engine: a bug to report."""


class UnknownError(OpError):
    """An error of no other class."""
