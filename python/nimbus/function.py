"""``nimbus.function``: Python functions traced into the engine's graphs (``tf.function``).

    @nimbus.function
    def train_step(x, y):
        with nimbus.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

The first call runs the Python function once on symbolic tensors, recording
its ops into a graph (``include/nimbus/graph/function.h``), which the engine
optimizes and later calls run without Python. As in TensorFlow, tensors and
NumPy arrays among the arguments (at any depth of lists, tuples and dicts)
become the graph's inputs, while every other argument (a Python number, a
string, an object) is part of the trace: calls with another value, another
nesting, or inputs of another shape or dtype trace again. Variables read in
the function are captured: the graph reads their value on every run.
"""
import functools
import types
import warnings

import numpy as np

from nimbus import _nimbus, nest
from nimbus.tensor_shape import TensorShape

# TensorFlow warns from the sixth trace on; the engine warns on the sixth shape of one trace.
_MAX_TRACES_BEFORE_WARNING = 5


class TensorSpec:
    """The shape and dtype of a tensor argument (``tf.TensorSpec``); None dimensions vary between calls."""

    def __init__(self, shape, dtype=_nimbus.DType.float32, name=None):
        self.shape = TensorShape(shape)
        self.dtype = _nimbus.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name)

    def is_compatible_with(self, value):
        """Whether ``value`` (a tensor or a spec) has this dtype and a shape this spec admits."""
        shape = TensorShape(value.shape)
        return (value.dtype == self.dtype and len(shape) == len(self.shape)
                and all(want is None or got is None or want == got for want, got in zip(self.shape, shape)))

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and (self.shape, self.dtype, self.name) ==
                (other.shape, other.dtype, other.name))

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r}, name={self.name!r})"


class _Trace:
    """What one trace key's graphs are made from: the Python function and the non-tensor arguments.

    It holds no reference to the engine's Function, whose body refers to it, so nothing cycles through
    C++, where Python's collector cannot see.
    """

    def __init__(self, python_function, structure, constants):
        self.python_function = python_function
        self.structure = structure  # (args, kwargs) with every leaf
        self.constants = constants  # the leaves, None where a tensor goes
        self.output_structure = None  # the result's nesting; True where a tensor is, None where None is

    def body(self, tensors):
        """The Python function on ``tensors`` (symbolic while tracing), its result as a flat tensor list."""
        inputs = iter(tensors)
        leaves = [next(inputs) if leaf is None else leaf for leaf in self.constants]
        args, kwargs = nest.pack_sequence_as(self.structure, leaves)
        result = self.python_function(*args, **kwargs)
        self.output_structure = nest.map_structure(lambda leaf: None if leaf is None else True, result)
        return [_nimbus.constant(leaf) for leaf in nest.flatten(result) if leaf is not None]

    def outputs(self, tensors):
        """The engine's flat results in the nesting the Python function returned."""
        results = iter(tensors)
        flat = [None if leaf is None else next(results) for leaf in nest.flatten(self.output_structure)]
        return nest.pack_sequence_as(self.output_structure, flat)


def _skeleton(structure):
    """The nesting of ``structure`` as a hashable value (types, dict keys), without its leaves."""
    if isinstance(structure, dict):
        return (type(structure), tuple((key, _skeleton(structure[key])) for key in sorted(structure)))
    if nest.is_nested(structure):
        return (type(structure), tuple(_skeleton(child) for child in structure))
    return None


class EagerOnly(Exception):
    """Raised while tracing by code that only runs eagerly (``strategy.run``): the function being traced then
    runs its Python eagerly, on this call and every later one."""


class Function:
    """A Python function that runs as traced graphs (``tf.function``'s result)."""

    def __init__(self, python_function, input_signature=None, jit_compile=None, reduce_retracing=False):
        functools.update_wrapper(self, python_function)
        self._python_function = python_function
        self._name = getattr(python_function, "__name__", "function")
        self._input_signature = None if input_signature is None else list(input_signature)
        self._jit_compile = jit_compile
        self._reduce_retracing = reduce_retracing  # accepted for TensorFlow's code; see docs/python.md
        self._traces = {}  # trace key -> (_Trace, the engine's Function)
        self._warned = False
        self._eager_only = False  # its tracing reached code that only runs eagerly (EagerOnly)
        if self._input_signature is not None:
            for spec in nest.flatten(self._input_signature):
                if not isinstance(spec, TensorSpec):
                    raise TypeError(f"nimbus.function '{self._name}': input_signature holds a "
                                    f"{type(spec).__name__}, not a nimbus.TensorSpec")

    @property
    def python_function(self):
        return self._python_function

    @property
    def input_signature(self):
        return self._input_signature

    def __get__(self, instance, owner):
        # A method: the instance is the first argument, part of the trace key.
        return self if instance is None else types.MethodType(self, instance)

    def __call__(self, *args, **kwargs):
        if not _nimbus.graph_mode() or self._eager_only:  # nimbus.config.run_functions_eagerly(True)
            return self._python_function(*args, **kwargs)
        try:
            trace, engine, tensors = self._trace_for(args, kwargs)
            return trace.outputs(engine(tensors))
        except EagerOnly:
            self._eager_only = True
            self._traces.clear()
            return self._python_function(*args, **kwargs)

    def get_concrete_function(self, *args, **kwargs):
        """The graph for these arguments (tensors, or TensorSpecs of concrete shapes), traced now."""
        if not args and not kwargs and self._input_signature is not None:
            args = tuple(self._input_signature)
        args, kwargs = nest.map_structure(self._example_of_spec, (args, kwargs))
        trace, engine, tensors = self._trace_for(args, kwargs)
        return ConcreteFunction(self, trace, engine, tensors)

    def experimental_get_tracing_count(self):
        """How many times the Python function has been traced."""
        return sum(engine.trace_count for _, engine in self._traces.values())

    def _example_of_spec(self, leaf):
        if not isinstance(leaf, TensorSpec):
            return leaf
        if not leaf.shape.is_fully_defined():
            raise ValueError(f"nimbus.function '{self._name}': get_concrete_function needs concrete shapes to "
                             f"trace, got {leaf}: Nimbus graphs have static shapes; pass a tensor or a "
                             "TensorSpec without None")
        return _nimbus.constant(np.zeros(tuple(leaf.shape), leaf.dtype.as_numpy_dtype), leaf.dtype)

    def _trace_for(self, args, kwargs):
        """The trace for these arguments, the engine's Function that runs it, and its tensor inputs."""
        if self._input_signature is not None:
            return self._signature_trace(args, kwargs)
        structure = (args, kwargs)
        constants, tensors, key = [], [], []
        for leaf in nest.flatten(structure):
            if isinstance(leaf, (_nimbus.Tensor, np.ndarray)):
                tensors.append(_nimbus.constant(leaf))
                constants.append(None)
                key.append(None)
                continue
            constants.append(leaf)
            if isinstance(leaf, _nimbus.Variable):
                key.append(("variable", _nimbus.variable_identity(leaf)))
                continue
            try:
                hash(leaf)
            except TypeError as error:
                raise TypeError(f"nimbus.function '{self._name}': an argument of type {type(leaf).__name__} "
                                "is neither a tensor nor hashable, so it cannot key a trace; pass it as a "
                                "tensor or capture it from the enclosing scope") from error
            key.append((type(leaf), leaf))
        key = (_skeleton(structure), tuple(key))
        if key not in self._traces:
            self._add_trace(key, _Trace(self._python_function, structure, constants), None)
        trace, engine = self._traces[key]
        return trace, engine, tensors

    def _signature_trace(self, args, kwargs):
        if kwargs:
            raise TypeError(f"nimbus.function '{self._name}' has an input_signature: pass its arguments "
                            f"positionally, got keywords {sorted(kwargs)}")
        specs = nest.flatten(self._input_signature)
        try:
            values = nest.flatten(nest.pack_sequence_as(self._input_signature, nest.flatten(list(args))))
        except ValueError as error:
            raise TypeError(f"nimbus.function '{self._name}': the arguments do not match the input_signature "
                            f"{self._input_signature}") from error
        # Tensors and arrays keep their dtype (the engine rejects a mismatch, naming both signatures);
        # Python numbers and lists take the spec's.
        tensors = [_nimbus.constant(value, None if isinstance(value, (_nimbus.Tensor, np.ndarray)) else spec.dtype)
                   for value, spec in zip(values, specs)]
        if "signature" not in self._traces:
            structure = (tuple(self._input_signature), {})
            engine_signature = [([-1 if d is None else d for d in spec.shape], spec.dtype) for spec in specs]
            self._add_trace("signature", _Trace(self._python_function, structure, [None] * len(specs)),
                            engine_signature)
        trace, engine = self._traces["signature"]
        return trace, engine, tensors

    def _add_trace(self, key, trace, engine_signature):
        engine = _nimbus.Function(trace.body, self._name, self._jit_compile, engine_signature)
        self._traces[key] = (trace, engine)
        if len(self._traces) > _MAX_TRACES_BEFORE_WARNING and not self._warned:
            self._warned = True
            warnings.warn(f"nimbus.function '{self._name}' is traced for its {len(self._traces)}th set of "
                          "Python arguments (numbers, strings, objects and nesting key a trace, as in "
                          "TensorFlow); each traces and optimizes the function again. Pass numbers that "
                          "change as tensors.", RuntimeWarning, stacklevel=4)


class ConcreteFunction:
    """The graph of one trace (``f.get_concrete_function(...)``); calling it calls the function."""

    def __init__(self, function, trace, engine, tensors):
        self._function = function
        self._trace = trace
        self._engine = engine
        self._tensors = tensors
        engine.trace(tensors)

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)

    @property
    def structured_outputs(self):
        """The nesting of the results: True where a tensor is, None where the function returned None."""
        return self._trace.output_structure

    def graph_text(self, optimized=True):
        """The graph as text, after the optimization passes (fusion among them) or as traced."""
        return self._engine.graph_text(self._tensors, self._function.__name__, optimized)


def function(func=None, input_signature=None, autograph=True, jit_compile=None, reduce_retracing=False,
             experimental_relax_shapes=None, **unsupported):  # pylint: disable=unused-argument
    """``tf.function``: ``@nimbus.function``, ``@nimbus.function(jit_compile=True)`` or ``function(f)``.

    ``jit_compile=True`` fuses chains of elementwise ops into single kernels
    (False: none); None follows ``nimbus.config.optimizer.set_jit``. There is
    no AutoGraph, so ``autograph`` changes nothing (docs/python.md);
    ``experimental_relax_shapes`` is TensorFlow's older name of ``reduce_retracing``.
    """
    if unsupported:
        raise TypeError(f"nimbus.function: unexpected keyword argument(s) {sorted(unsupported)}")
    if experimental_relax_shapes is not None:
        reduce_retracing = experimental_relax_shapes
    if func is None:
        return functools.partial(function, input_signature=input_signature, jit_compile=jit_compile,
                                 reduce_retracing=reduce_retracing)
    return Function(func, input_signature, jit_compile, reduce_retracing)
