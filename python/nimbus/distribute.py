"""``nimbus.distribute``: TensorFlow's distribution strategies over the engine's (distribute/strategy.h).

A strategy holds the engine's strategy, the one ``nimbus train`` runs: a Keras
model made (or compiled) in ``strategy.scope()`` trains with it, ``fit``'s
batch being the global batch split evenly over the replicas. ``strategy.run``
runs a Python function on every local replica's thread at once (each takes the
GIL in turn); ``ReplicaContext.all_reduce`` and ``reduce`` meet across them and,
for ``MultiWorkerMirroredStrategy``, across the MPI job's processes.
"""
import contextlib
import threading
import types

import numpy as np

from nimbus import _nimbus, config, errors, function, nest
from nimbus import devices as device_module


class ReduceOp:
    """How ``reduce`` and ``all_reduce`` combine the replicas' values."""
    SUM = "SUM"
    MEAN = "MEAN"


class PerReplica:
    """One value per local replica: what ``run`` returns and a distributed dataset yields with several."""

    def __init__(self, values):
        self.values = tuple(values)

    def __repr__(self):
        return f"PerReplica({list(self.values)!r})"


class InputContext:
    """What ``distribute_datasets_from_function``'s function is told: which input pipeline it makes."""

    def __init__(self, num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1):
        self.num_input_pipelines = num_input_pipelines
        self.input_pipeline_id = input_pipeline_id
        self.num_replicas_in_sync = num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size):
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(f"The `global_batch_size` {global_batch_size} is not divisible by "
                             f"`num_replicas_in_sync` {self.num_replicas_in_sync}")
        return global_batch_size // self.num_replicas_in_sync


class ReplicaContext:
    """The replica a function passed to ``run`` runs as (``get_replica_context()`` inside it)."""

    def __init__(self, strategy, replica_id):
        self.strategy = strategy
        self.replica_id_in_sync_group = replica_id

    @property
    def num_replicas_in_sync(self):
        return self.strategy.num_replicas_in_sync

    def all_reduce(self, reduce_op, value):
        """``value`` (a tensor or a nest of them) summed or averaged over every replica in sync."""
        return nest.map_structure(lambda v: _nimbus.replica_all_reduce(v, _op_name(reduce_op)), value)


def _op_name(reduce_op):
    name = str(getattr(reduce_op, "value", reduce_op)).upper().rsplit(".", 1)[-1]
    if name not in (ReduceOp.SUM, ReduceOp.MEAN):
        raise ValueError(f"reduce op {reduce_op!r}: use ReduceOp.SUM or ReduceOp.MEAN")
    return name


# Per thread, as in TensorFlow: the strategies whose scopes are open, and the replica this thread runs.
_local = threading.local()


def _scopes():
    if not hasattr(_local, "scopes"):
        _local.scopes = []
    return _local.scopes


def _replica_context():
    return getattr(_local, "replica", None)


class Strategy:
    """A distribution strategy: where replicas run and how they meet (``tf.distribute.Strategy``)."""

    def __init__(self, native):
        config._mark_initialized()  # pylint: disable=protected-access  (TensorFlow's strategies initialize it too)
        self._native = native

    @property
    def num_replicas_in_sync(self):
        """Replicas over every worker."""
        return self._native.num_replicas_in_sync

    @property
    def _local_replicas(self):
        return len(self._native.devices)

    @property
    def _first_replica_id(self):
        return self._native.worker_rank * self._local_replicas

    @contextlib.contextmanager
    def scope(self):
        """Models made (and compiled) inside train with this strategy; ``get_strategy()`` returns it."""
        _scopes().append(self)
        try:
            yield self
        finally:
            _scopes().pop()

    def run(self, fn, args=(), kwargs=None):
        """``fn(*args, **kwargs)`` on every local replica at once, each with its part of ``PerReplica`` arguments.

        Returns the replica's result with one local replica, else ``PerReplica`` values (per leaf of the
        result's structure).
        """
        if _nimbus.tracing() and self.num_replicas_in_sync > 1:
            # Several replicas run eagerly, each on its thread (one runs in this thread, traced with it).
            raise function.EagerOnly("strategy.run of several replicas inside a nimbus.function runs eagerly")
        kwargs = kwargs or {}
        results = [None] * self._local_replicas

        def replica_fn(local):
            _local.replica = ReplicaContext(self, self._first_replica_id + local)
            try:
                replica_args, replica_kwargs = _for_replica((args, kwargs), local)
                results[local] = fn(*replica_args, **replica_kwargs)
            finally:
                _local.replica = None

        self._native.run(replica_fn)
        if len(results) == 1:
            return results[0]
        return nest.map_structure(lambda *values: PerReplica(values), *results)

    def experimental_local_results(self, value):
        """The values of this worker's replicas, as a tuple."""
        return value.values if isinstance(value, PerReplica) else (value,)

    def reduce(self, reduce_op, value, axis=None):
        """``value`` (per replica) combined over every replica in sync: ``SUM`` or ``MEAN``.

        With ``axis``, each replica's value is first summed along it, and ``MEAN`` divides by the number of
        elements along it over all replicas (the mean over the global batch). A value that is not
        ``PerReplica`` is every local replica's.
        """
        op = _op_name(reduce_op)
        local_values = value.values if isinstance(value, PerReplica) else (value,) * self._local_replicas
        partials = [_nimbus.constant(v) for v in local_values]
        if axis is None:
            total, count = _nimbus.add_n(partials) if len(partials) > 1 else partials[0], self.num_replicas_in_sync
        else:
            total = _nimbus.add_n([_nimbus.reduce_sum(v, axis) for v in partials])
            count = sum(int(v.shape[axis]) for v in partials)
        if self._native.num_workers > 1:
            total = self._sum_over_workers(total)
            if axis is not None:
                count = int(self._sum_over_workers(np.float32(count)).numpy())
        if op == ReduceOp.SUM:
            return total
        return (total if total.dtype.is_floating else _nimbus.cast(total, "float32")) / float(count)

    def _sum_over_workers(self, value):
        """``value`` summed over the workers of a multi-worker job, each of which runs one replica."""
        reduced = []
        self._native.run(lambda _: reduced.append(_nimbus.replica_all_reduce(value, ReduceOp.SUM)))
        return reduced[0]

    def experimental_distribute_dataset(self, dataset, options=None):  # pylint: disable=unused-argument
        """A dataset of global batches as replicas' batches: each global batch's rows split over the replicas.

        ``dataset`` is anything iterable whose elements are batches: a ``nimbus.data.Dataset``, a list of
        ``(x, y)`` NumPy arrays, a generator. Worker w of W takes its share of each global batch, as ``fit`` does.
        """
        return _DistributedDataset(self, dataset)

    def distribute_datasets_from_function(self, dataset_fn, options=None):  # pylint: disable=unused-argument
        """``dataset_fn(InputContext)`` makes this worker's dataset of per-replica batches; consecutive
        batches go to its local replicas in turn."""
        context = InputContext(self._native.num_workers, self._native.worker_rank, self.num_replicas_in_sync)
        return _DatasetFromFunction(self, dataset_fn(context))

    experimental_distribute_datasets_from_function = distribute_datasets_from_function


def _for_replica(structure, local):
    """``structure`` with every ``PerReplica`` leaf replaced by local replica ``local``'s value."""
    if isinstance(structure, PerReplica):
        return structure.values[local]
    if isinstance(structure, dict):
        return type(structure)((k, _for_replica(v, local)) for k, v in structure.items())
    if isinstance(structure, (list, tuple)):
        children = [_for_replica(v, local) for v in structure]
        return type(structure)(*children) if hasattr(type(structure), "_fields") else type(structure)(children)
    return structure


def _rows(leaf, start, stop):
    return _nimbus.constant(leaf[start:stop]) if isinstance(leaf, np.ndarray) else leaf[start:stop]


class _DistributedDataset:
    def __init__(self, strategy, dataset):
        self._strategy = strategy
        self._dataset = dataset

    def __iter__(self):
        replicas = self._strategy.num_replicas_in_sync
        first, local = self._strategy._first_replica_id, self._strategy._local_replicas  # pylint: disable=protected-access
        for element in self._dataset:
            leaves = nest.flatten(element)
            rows = int(leaves[0].shape[0])

            def share(replica, element=element, rows=rows):
                start, stop = rows * replica // replicas, rows * (replica + 1) // replicas
                return nest.map_structure(lambda leaf: _rows(np.asarray(leaf) if isinstance(leaf, (list, int, float))
                                                             else leaf, start, stop), element)

            shares = [share(first + i) for i in range(local)]
            yield shares[0] if local == 1 else nest.map_structure(lambda *values: PerReplica(values), *shares)


class _DatasetFromFunction:
    def __init__(self, strategy, dataset):
        self._strategy = strategy
        self._dataset = dataset

    def __iter__(self):
        local = self._strategy._local_replicas  # pylint: disable=protected-access
        batches = []
        for element in self._dataset:
            batches.append(nest.map_structure(lambda leaf: _nimbus.constant(leaf) if isinstance(leaf, np.ndarray)
                                              else leaf, element))
            if len(batches) == local:
                yield batches[0] if local == 1 else nest.map_structure(lambda *values: PerReplica(values), *batches)
                batches = []


class OneDeviceStrategy(Strategy):
    """One replica on one device (``'/GPU:0'``, ``'/CPU:0'``)."""

    def __init__(self, device):
        device_type, index = device_module.parse(device)
        super().__init__(_nimbus.one_device_strategy(device_module.engine_name(device_type, index)))


class CrossDeviceOps:
    """How replicas' values are combined (TF's NCCL, hierarchical copy, ...): accepted by
    ``MirroredStrategy(cross_device_ops=...)`` for TF's code; the engine's collectives always do it."""

    def __init__(self, *args, **kwargs):  # pylint: disable=unused-argument
        pass


class NcclAllReduce(CrossDeviceOps):
    pass


class HierarchicalCopyAllReduce(CrossDeviceOps):
    pass


class ReductionToOneDevice(CrossDeviceOps):
    pass


class MirroredStrategy(Strategy):
    """One replica per local device: ``devices`` (``['/CPU:0', '/CPU:1']``), or by default every GPU, else
    the CPU's logical devices (``config.set_logical_device_configuration``), else the CPU alone."""

    def __init__(self, devices=None, cross_device_ops=None):
        if cross_device_ops is not None and not isinstance(cross_device_ops, CrossDeviceOps):
            raise ValueError(f"MirroredStrategy: cross_device_ops {cross_device_ops!r} is not a CrossDeviceOps")
        if devices is None:
            gpus = device_module.count("GPU")
            names = ([device_module.engine_name("GPU", i) for i in range(gpus)] if gpus else
                     [device_module.engine_name("CPU", i) for i in range(device_module.count("CPU"))])
        else:
            names = [device_module.engine_name(*device_module.parse(d)) for d in devices]
        if not names:
            raise ValueError("MirroredStrategy: devices is empty")
        native = (_nimbus.one_device_strategy(names[0]) if len(names) == 1 else _nimbus.mirrored_strategy(names))
        super().__init__(native)


class MultiWorkerMirroredStrategy(Strategy):
    """One replica per process of an MPI job (``mpirun -np N python3 script.py``): rank and size come from
    MPI, not TF_CONFIG; the processes meet over MPI."""

    def __init__(self, cluster_resolver=None, communication_options=None):  # pylint: disable=unused-argument
        if cluster_resolver is not None:
            raise errors.UnimplementedError("MultiWorkerMirroredStrategy: cluster_resolver",
                                            "launch the workers with mpirun; MPI gives each its rank")
        super().__init__(_nimbus.multi_worker_mirrored_strategy())

    @property
    def cluster_resolver(self):
        """This worker's place in the job: ``task_type`` 'worker', ``task_id`` its MPI rank."""
        return types.SimpleNamespace(task_type="worker", task_id=self._native.worker_rank,
                                     num_workers=self._native.num_workers)


class _DefaultStrategy(Strategy):
    """The strategy in effect outside every scope: one replica on the CPU, run in the calling thread."""

    def __init__(self):  # pylint: disable=super-init-not-called  (made at import: initializes nothing)
        self._engine_strategy = None

    @property
    def _native(self):
        if self._engine_strategy is None:
            self._engine_strategy = _nimbus.one_device_strategy("cpu:0")
        return self._engine_strategy

    def run(self, fn, args=(), kwargs=None):
        return fn(*args, **(kwargs or {}))

    @property
    def num_replicas_in_sync(self):
        return 1


_default_strategy = _DefaultStrategy()


def get_strategy():
    """The strategy of the innermost open ``scope()``; a one-replica default outside all of them."""
    return _scopes()[-1] if _scopes() else _default_strategy


def has_strategy():
    return bool(_scopes())


def in_cross_replica_context():
    """Inside a strategy's scope and outside ``run``."""
    return has_strategy() and _replica_context() is None


def get_replica_context():
    """The replica this thread runs inside ``run``; None in a scope outside it (cross-replica context); a
    one-replica context outside every scope."""
    if _replica_context() is not None:
        return _replica_context()
    return None if has_strategy() else ReplicaContext(_default_strategy, 0)


def _scope_strategy():
    """The strategy a Keras model made now trains with: the innermost open scope's, or None."""
    return _scopes()[-1] if _scopes() else None


class CommunicationImplementation:
    """TF's choice of collective implementation: accepted, the engine's MPI collectives always serve."""
    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


class CommunicationOptions:
    """Accepted by ``MultiWorkerMirroredStrategy(communication_options=...)`` for TF's code; no effect."""

    def __init__(self, bytes_per_pack=0, timeout_seconds=None, implementation=CommunicationImplementation.AUTO):
        self.bytes_per_pack = bytes_per_pack
        self.timeout_seconds = timeout_seconds
        self.implementation = implementation


experimental = types.SimpleNamespace(MultiWorkerMirroredStrategy=MultiWorkerMirroredStrategy,
                                     CommunicationImplementation=CommunicationImplementation,
                                     CollectiveCommunication=CommunicationImplementation,
                                     CommunicationOptions=CommunicationOptions)
