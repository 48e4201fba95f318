"""``nimbus.data.Dataset``: an immutable pipeline recipe whose elements are nests of tensors.

The engine's Dataset sees flat lists of tensors; this class keeps the nesting (tuples, dicts) and the
spec of each component (``element_spec``). Strings (file names, lines, records) are uint8 vectors in
the engine; ``as_numpy_iterator`` gives them back as ``bytes``.
"""
import os

from nimbus import _nimbus, nest
from nimbus.errors import InvalidArgumentError
from nimbus.function import TensorSpec

_data = _nimbus._data  # pylint: disable=protected-access

AUTOTUNE = _data.AUTOTUNE
INFINITE_CARDINALITY = _data.INFINITE_CARDINALITY
UNKNOWN_CARDINALITY = _data.UNKNOWN_CARDINALITY

_STRING = "string"  # TensorSpec.name of a string component (a uint8 vector of the string's bytes)
_UNTRACEABLE = ("has no value", "symbolic tensor")


def _string_spec():
    return TensorSpec([None], _nimbus.DType.uint8, name=_STRING)


def _parallelism(num_parallel_calls):
    return 1 if num_parallel_calls is None else int(num_parallel_calls)


def _paths(filenames):
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    return [os.fsdecode(name) for name in filenames]


def _shapes_up_to(spec, shapes):
    """One shape per component of ``spec``, from ``shapes`` nested as the element is (a shape is a list)."""
    if isinstance(spec, TensorSpec):
        return [shapes]
    if isinstance(spec, dict):
        return [s for key in sorted(spec) for s in _shapes_up_to(spec[key], shapes[key])]
    return [s for part, shape in zip(spec, shapes) for s in _shapes_up_to(part, shape)]


def _call(func, element):
    """TensorFlow's convention: a tuple element is unpacked into the function's arguments."""
    return func(*element) if isinstance(element, tuple) else func(element)


class _TracedFunction:
    """``func`` traced on symbolic tensors of ``spec`` into the engine's ElementFunction."""

    def __init__(self, func, spec, what):
        self.output_structure = None
        name = getattr(func, "__name__", type(func).__name__)

        def body(tensors):
            result = _call(func, nest.pack_sequence_as(spec, tensors))
            self.output_structure = result
            return [_nimbus.constant(leaf) for leaf in nest.flatten(result)]

        engine_specs = [([-1 if d is None else d for d in s.shape], s.dtype) for s in nest.flatten(spec)]
        try:
            self.engine = _data.ElementFunction(body, engine_specs, name)
        except InvalidArgumentError as error:
            if not any(text in str(error) for text in _UNTRACEABLE):
                raise
            raise TypeError(
                f"{what} could not trace '{name}': it reads the value of a symbolic tensor ({error}), as NumPy "
                "calls and Python control flow on a tensor (if, while, float()) do. A dataset function is traced "
                "once into the engine's ops, which run without the GIL. Write it with nimbus ops (nimbus.where, "
                "nimbus.cast, nimbus.image, nimbus.io), or wrap the Python part in nimbus.py_function(func, inp, "
                "Tout), which runs it under the GIL and so serializes the pipeline") from error
        specs = [TensorSpec(shape, dtype) for shape, dtype in self.engine.output_specs]
        self.output_spec = nest.pack_sequence_as(self.output_structure, specs)


class Dataset:
    """A pipeline of elements (``tf.data.Dataset``); build it with the static methods, then chain."""

    def __init__(self, engine, element_spec):
        self._engine = engine
        self._element_spec = element_spec

    # ---- sources ----

    @staticmethod
    def from_tensor_slices(tensors, name=None):  # pylint: disable=unused-argument
        """Slices of ``tensors`` (an array, or a tuple or dict of arrays) along their first axis."""
        leaves = [_nimbus.constant(leaf) for leaf in nest.flatten(tensors)]
        for leaf in leaves:
            if leaf.ndim == 0:
                raise InvalidArgumentError("from_tensor_slices: a scalar has no first axis to slice",
                                           "pass arrays of rank >= 1, or use from_tensors")
        specs = [TensorSpec(leaf.shape[1:], leaf.dtype) for leaf in leaves]
        return Dataset(_data.Dataset.from_tensor_slices(leaves), nest.pack_sequence_as(tensors, specs))

    @staticmethod
    def from_tensors(tensors, name=None):  # pylint: disable=unused-argument
        """One element: ``tensors`` itself."""
        leaves = [_nimbus.constant(leaf) for leaf in nest.flatten(tensors)]
        specs = [TensorSpec(leaf.shape, leaf.dtype) for leaf in leaves]
        return Dataset(_data.Dataset.from_tensors(leaves), nest.pack_sequence_as(tensors, specs))

    @staticmethod
    def range(*args, output_type=_nimbus.DType.int64, name=None):  # pylint: disable=unused-argument
        """``range(stop)``, ``range(start, stop[, step])``: int64 scalars, as Python's range."""
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
        dataset = Dataset(_data.Dataset.range(int(start), int(stop), int(step)), TensorSpec([], _nimbus.DType.int64))
        if _nimbus.as_dtype(output_type) != _nimbus.DType.int64:
            dataset = dataset.map(lambda x: _nimbus.cast(x, output_type))
        return dataset

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None,
                       name=None):  # pylint: disable=unused-argument
        """Elements of a Python generator: each one is made under the GIL, so this source is slow."""
        if output_signature is None:
            if output_types is None:
                raise TypeError("from_generator needs output_signature (or output_types)")
            shapes = output_shapes if output_shapes is not None else nest.map_structure(lambda _: None, output_types)
            output_signature = nest.map_structure(
                lambda dtype, shape: TensorSpec(shape if shape is not None else [], dtype), output_types, shapes)
        specs = nest.flatten(output_signature)

        def make_generator():
            iterator = iter(generator(*(args or ())))

            def next_element():
                try:
                    element = next(iterator)
                except StopIteration:
                    return None
                return [_nimbus.constant(leaf, spec.dtype) for leaf, spec in zip(nest.flatten(element), specs)]

            return next_element

        return Dataset(_data.Dataset.from_generator(make_generator), output_signature)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None):  # pylint: disable=unused-argument
        """Paths matching the glob pattern(s), as strings; shuffled unless ``shuffle=False``."""
        return Dataset(_data.Dataset.list_files(_paths(file_pattern), shuffle is not False, seed), _string_spec())

    @staticmethod
    def zip(*datasets, name=None):  # pylint: disable=unused-argument
        """Elements side by side: ``zip((a, b))`` or ``zip(a, b)`` gives ``(a_i, b_i)``; ends with the shortest."""
        structure = datasets[0] if len(datasets) == 1 else datasets
        flat = nest.flatten(structure)
        return Dataset(_data.Dataset.zip([d._engine for d in flat]),  # pylint: disable=protected-access
                       nest.pack_sequence_as(structure, [d.element_spec for d in flat]))

    # ---- what an element is ----

    @property
    def element_spec(self):
        """The nesting of an element with a ``TensorSpec`` per component (None: a length that varies)."""
        return self._element_spec

    def cardinality(self):
        """The number of elements as an int64 tensor; INFINITE_CARDINALITY (-1) or UNKNOWN_CARDINALITY (-2)."""
        return _nimbus.constant(self._engine.cardinality(), _nimbus.DType.int64)

    def __len__(self):
        count = self._engine.cardinality()
        if count == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if count == UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return count

    def __repr__(self):
        return f"<Dataset element_spec={self._element_spec}>"

    # ---- iteration ----

    def _flat_elements(self):
        iterator = self._engine.iterator()
        while True:
            flat = iterator.next()
            if flat is None:
                return
            yield flat

    def __iter__(self):
        for flat in self._flat_elements():
            yield nest.pack_sequence_as(self._element_spec, flat)

    def as_numpy_iterator(self):
        """Elements as NumPy arrays (strings as ``bytes``), in their nesting."""
        specs = nest.flatten(self._element_spec)
        for flat in self._flat_elements():
            leaves = [t.numpy().tobytes() if s.name == _STRING else t.numpy() for t, s in zip(flat, specs)]
            yield nest.pack_sequence_as(self._element_spec, leaves)

    def _with(self, engine, element_spec=None):
        return Dataset(engine, self._element_spec if element_spec is None else element_spec)

    # ---- transforms ----

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):  # pylint: disable=unused-argument
        """``map_func`` on each element, traced once and run on the pipeline's threads without the GIL."""
        traced = _TracedFunction(map_func, self._element_spec, "Dataset.map")
        engine = self._engine.map(traced.engine, _parallelism(num_parallel_calls), deterministic is not False)
        return self._with(engine, traced.output_spec)

    def filter(self, predicate, name=None):  # pylint: disable=unused-argument
        """The elements for which ``predicate`` (traced like map's function) returns True."""
        traced = _TracedFunction(predicate, self._element_spec, "Dataset.filter")
        return self._with(self._engine.filter(traced.engine))

    def _dataset_function(self, map_func):
        """A function from an element to a dataset (flat_map's, interleave's), called under the GIL."""
        def engine_function(flat):
            return _call(map_func, nest.pack_sequence_as(self._element_spec, flat))._engine  # pylint: disable=protected-access

        first = next(iter(self.take(1)), None)  # the inner datasets' spec, from the first element's
        spec = None if first is None else _call(map_func, first).element_spec
        return engine_function, spec

    def flat_map(self, map_func, name=None):  # pylint: disable=unused-argument
        """The elements of ``map_func(element)`` (a dataset) for each element, one after another."""
        engine_function, spec = self._dataset_function(map_func)
        return self._with(self._engine.flat_map(engine_function), spec)

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):  # pylint: disable=unused-argument
        """Like flat_map, drawing from ``cycle_length`` inner datasets in turn, ``block_length`` at a time."""
        engine_function, spec = self._dataset_function(map_func)
        cycle = (os.cpu_count() or 1) if cycle_length in (None, AUTOTUNE) else int(cycle_length)
        engine = self._engine.interleave(engine_function, cycle, int(block_length or 1),
                                         _parallelism(num_parallel_calls))
        return self._with(engine, spec)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):  # pylint: disable=unused-argument
        return self._with(self._engine.shuffle(int(buffer_size), seed, reshuffle_each_iteration is not False))

    def _batched_spec(self, batch_size, drop_remainder):
        outer = int(batch_size) if drop_remainder else None
        return nest.map_structure(lambda s: TensorSpec((outer,) + tuple(s.shape), s.dtype, s.name),
                                  self._element_spec)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):  # pylint: disable=unused-argument
        """Stacks ``batch_size`` consecutive elements along a new first axis."""
        return self._with(self._engine.batch(int(batch_size), bool(drop_remainder)),
                          self._batched_spec(batch_size, drop_remainder))

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):  # pylint: disable=unused-argument
        """Like batch, padding each component to the batch's largest shape (or to ``padded_shapes``)."""
        shapes = [] if padded_shapes is None else [list(s) for s in _shapes_up_to(self._element_spec, padded_shapes)]
        if any(d is None or d < 0 for s in shapes for d in s):
            if not all(d is None or d < 0 for s in shapes for d in s):
                raise InvalidArgumentError("padded_batch: padded_shapes mixes None and lengths",
                                           "give every length, or None for all (the batch's largest)")
            shapes = []
        values = [] if padding_values is None else [float(v) for v in nest.flatten(padding_values)]
        spec = self._batched_spec(batch_size, drop_remainder)
        if shapes:
            spec = nest.pack_sequence_as(spec, [TensorSpec([s.shape[0]] + shape, s.dtype, s.name)
                                                for s, shape in zip(nest.flatten(spec), shapes)])
        return self._with(self._engine.padded_batch(int(batch_size), shapes, values, bool(drop_remainder)), spec)

    def unbatch(self, name=None):  # pylint: disable=unused-argument
        """Slices each element along its first axis."""
        spec = nest.map_structure(lambda s: TensorSpec(s.shape[1:], s.dtype, s.name), self._element_spec)
        return self._with(self._engine.unbatch(), spec)

    def cache(self, filename="", name=None):  # pylint: disable=unused-argument
        """Keeps the elements of the first pass, in memory or (``filename``) in a file later runs read too."""
        return self._with(self._engine.cache(os.fsdecode(filename)))

    def prefetch(self, buffer_size, name=None):  # pylint: disable=unused-argument
        return self._with(self._engine.prefetch(int(buffer_size)))

    def repeat(self, count=None, name=None):  # pylint: disable=unused-argument
        return self._with(self._engine.repeat(-1 if count is None else int(count)))

    def take(self, count, name=None):  # pylint: disable=unused-argument
        return self._with(self._engine.take(int(count)))

    def skip(self, count, name=None):  # pylint: disable=unused-argument
        return self._with(self._engine.skip(int(count)))

    def shard(self, num_shards, index, name=None):  # pylint: disable=unused-argument
        return self._with(self._engine.shard(int(num_shards), int(index)))

    def enumerate(self, start=0, name=None):  # pylint: disable=unused-argument
        """``(i, element)`` with an int64 counter from ``start``."""
        return self._with(self._engine.enumerate(int(start)), (TensorSpec([], _nimbus.DType.int64),
                                                               self._element_spec))

    def ignore_errors(self, log_warning=False, name=None):  # pylint: disable=unused-argument
        """Skips elements whose production fails (corrupt records, failing decodes)."""
        return self._with(self._engine.ignore_errors())


def _file_dataset(make, filenames, num_parallel_reads):
    """One engine source over ``filenames`` (paths, or a dataset of them, as list_files gives)."""
    if isinstance(filenames, Dataset):
        return filenames.interleave(lambda name: Dataset(make([bytes(name.numpy()).decode()]), _string_spec()),
                                    cycle_length=num_parallel_reads or 1, num_parallel_calls=num_parallel_reads)
    return Dataset(make(_paths(filenames)), _string_spec())


def TFRecordDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):  # pylint: disable=invalid-name,unused-argument
    """The records of TFRecord files, as strings; ``compression_type`` '', 'ZLIB' or 'GZIP'."""
    return _file_dataset(lambda paths: _data.Dataset.tfrecord(paths, compression_type or ""), filenames,
                         num_parallel_reads)


def TextLineDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):  # pylint: disable=invalid-name,unused-argument
    """The lines of text files (gzip or plain), without their line ends, as strings."""
    return _file_dataset(_data.Dataset.text_line, filenames, num_parallel_reads)
