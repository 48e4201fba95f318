"""nimbus.distribute over two logical CPU devices, as TensorFlow's distributed-training guides use it:

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = ...
        model.compile(...)
    model.fit(x, y, batch_size=GLOBAL_BATCH_SIZE)
"""
import numpy as np
import pytest

import nimbus as tf

# Before anything initializes the runtime, as in TensorFlow: two logical CPU devices.
CPU = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(CPU, [tf.config.LogicalDeviceConfiguration()] * 2)

GLOBAL_BATCH = 64


def data(samples=512, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, 20)).astype(np.float32)
    y = (x[:, :10].sum(axis=1) > x[:, 10:].sum(axis=1)).astype(np.int32) + 2 * (x[:, 0] > 0).astype(np.int32)
    return x, y


def make_model():
    return tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(20,)),
                                tf.keras.layers.Dense(4)])


def compile_model(model):
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def test_the_cpu_is_split_into_two_logical_devices():
    assert [d.name for d in tf.config.list_logical_devices("CPU")] == ["/device:CPU:0", "/device:CPU:1"]
    assert len(tf.config.get_logical_device_configuration(CPU)) == 2


def test_mirrored_strategy_takes_the_logical_cpu_devices_by_default():
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2
    assert tf.distribute.MirroredStrategy(["/cpu:0"]).num_replicas_in_sync == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not exist"):
        tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:5"])
    # TF's guides pass a cross-device op; the engine's collectives reduce whichever is named.
    strategy = tf.distribute.MirroredStrategy(cross_device_ops=tf.distribute.HierarchicalCopyAllReduce())
    assert strategy.num_replicas_in_sync == 2


def test_mirrored_fit_trains_to_the_weights_of_one_device_at_the_same_global_batch():
    x, y = data()
    single = make_model()
    initial = single.get_weights()
    compile_model(single)
    single_history = single.fit(x, y, batch_size=GLOBAL_BATCH, epochs=3, shuffle=False, verbose=0)

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        mirrored = make_model()
        mirrored.set_weights(initial)
        compile_model(mirrored)
    assert mirrored.distribute_strategy is strategy
    history = mirrored.fit(x, y, batch_size=GLOBAL_BATCH, epochs=3, shuffle=False, verbose=0)  # after the scope

    for got, want in zip(mirrored.get_weights(), single.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(history.history["loss"], single_history.history["loss"], rtol=1e-4)
    # The weights moved: the comparison is not of two untrained models.
    assert max(np.abs(w - w0).max() for w, w0 in zip(single.get_weights(), initial)) > 1e-2
    # The batch is split over the two replicas: an odd one is refused.
    with pytest.raises(tf.errors.InvalidArgumentError, match="2 replicas"):
        mirrored.fit(x, y, batch_size=GLOBAL_BATCH - 1, verbose=0)


def test_strategy_run_gives_per_replica_values_and_reduce_combines_them():
    strategy = tf.distribute.MirroredStrategy()

    def replica_fn():
        context = tf.distribute.get_replica_context()
        return tf.constant([[1.0, 2.0]]) * float(context.replica_id_in_sync_group + 1)

    with strategy.scope():
        assert tf.distribute.get_replica_context() is None  # cross-replica context
        per_replica = strategy.run(replica_fn)
    values = strategy.experimental_local_results(per_replica)
    np.testing.assert_array_equal(values[0].numpy(), [[1, 2]])
    np.testing.assert_array_equal(values[1].numpy(), [[2, 4]])
    np.testing.assert_array_equal(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None).numpy(),
                                  [[3, 6]])
    np.testing.assert_array_equal(strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None).numpy(),
                                  [[1.5, 3]])
    np.testing.assert_array_equal(strategy.reduce("SUM", per_replica, axis=0).numpy(), [3, 6])
    np.testing.assert_array_equal(strategy.reduce("MEAN", per_replica, axis=1).numpy(), [4.5 / 2])
    # A value that is not per replica is every replica's.
    np.testing.assert_array_equal(strategy.reduce("MEAN", tf.constant([1.0, 3.0]), axis=None).numpy(), [1, 3])
    np.testing.assert_array_equal(strategy.reduce("SUM", tf.constant([1.0, 3.0]), axis=None).numpy(), [2, 6])


def test_replica_context_all_reduce_meets_across_the_replicas():
    strategy = tf.distribute.MirroredStrategy()

    def replica_fn(value):
        context = tf.distribute.get_replica_context()
        return (context.all_reduce(tf.distribute.ReduceOp.SUM, value),
                context.all_reduce(tf.distribute.ReduceOp.MEAN, {"v": value}))

    per_replica = tf.distribute.PerReplica([tf.constant([1.0, 10.0]), tf.constant([3.0, 30.0])])
    summed, averaged = strategy.run(replica_fn, args=(per_replica,))
    for replica in range(2):
        np.testing.assert_array_equal(summed.values[replica].numpy(), [4, 40])
        np.testing.assert_array_equal(averaged["v"].values[replica].numpy(), [2, 20])


def test_a_replicas_exception_comes_out_of_run():
    strategy = tf.distribute.MirroredStrategy()

    def replica_fn():
        if tf.distribute.get_replica_context().replica_id_in_sync_group == 1:
            raise KeyError("replica 1 failed")
        return tf.constant(1.0)

    with pytest.raises(KeyError, match="replica 1 failed"):
        strategy.run(replica_fn)
    assert strategy.run(lambda: tf.constant(2.0)).values[1].numpy() == 2.0  # the strategy still works


def test_experimental_distribute_dataset_splits_each_global_batch_over_the_replicas():
    strategy = tf.distribute.MirroredStrategy()
    x = np.arange(16, dtype=np.float32).reshape(16, 1)
    batches = [(x[i:i + 8], x[i:i + 8, 0] * 2) for i in range(0, 16, 8)]
    seen = []
    for features, labels in strategy.experimental_distribute_dataset(batches):
        seen.append([f.numpy()[:, 0].tolist() for f in strategy.experimental_local_results(features)])
        np.testing.assert_array_equal(labels.values[1].numpy(), features.values[1].numpy()[:, 0] * 2)
    assert seen == [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]]


def test_distribute_datasets_from_function_gives_each_replica_its_own_batch():
    strategy = tf.distribute.MirroredStrategy()
    contexts = []

    def dataset_fn(input_context):
        contexts.append(input_context)
        batch = input_context.get_per_replica_batch_size(8)
        return [np.full((batch, 2), i, np.float32) for i in range(4)]

    batches = list(strategy.distribute_datasets_from_function(dataset_fn))
    assert (contexts[0].num_input_pipelines, contexts[0].input_pipeline_id, contexts[0].num_replicas_in_sync) == (1, 0, 2)
    assert [[v.numpy()[0, 0] for v in b.values] for b in batches] == [[0, 1], [2, 3]]
    assert batches[0].values[0].shape == (4, 2)


def test_a_custom_training_loop_matches_one_device():
    """The guide's custom loop: a nimbus.function running strategy.run of a step whose loss is averaged over the
    global batch."""
    x, y = data(samples=64, seed=1)
    targets = y.astype(np.float32).reshape(-1, 1)
    w0 = np.random.default_rng(2).normal(size=(20, 1)).astype(np.float32)

    def train(strategy, steps=5):
        with strategy.scope():
            w = tf.Variable(w0)
            b = tf.Variable(np.zeros(1, np.float32))
            optimizer = tf.keras.optimizers.SGD(0.05)

        def step(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                per_example = tf.reduce_sum(tf.square(tf.matmul(features, w) + b - labels), axis=1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=64)
            optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))
            return loss

        @tf.function
        def distributed_train_step(dataset_inputs):
            per_replica_losses = strategy.run(step, args=(dataset_inputs,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

        losses = []
        for _ in range(steps):
            for batch in strategy.experimental_distribute_dataset([(x, targets)]):
                losses.append(float(distributed_train_step(batch).numpy()))
        return w.numpy(), b.numpy(), losses

    w_one, b_one, losses_one = train(tf.distribute.OneDeviceStrategy("/cpu:0"))  # traced: one replica
    w_two, b_two, losses_two = train(tf.distribute.MirroredStrategy())
    np.testing.assert_allclose(w_two, w_one, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b_two, b_one, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses_two, losses_one, rtol=1e-5)
    assert losses_one[-1] < losses_one[0]


def test_the_default_strategy_outside_every_scope():
    assert not tf.distribute.has_strategy()
    assert tf.distribute.get_strategy().num_replicas_in_sync == 1
    assert tf.distribute.get_replica_context().num_replicas_in_sync == 1
    assert tf.distribute.get_strategy().run(lambda a: a + 1, args=(1,)) == 2


def test_the_replicas_function_may_be_traced_and_the_caller_of_run_runs_eagerly():
    strategy = tf.distribute.MirroredStrategy()
    w = tf.Variable(np.ones((3, 1), np.float32))

    @tf.function
    def replica_step(features):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.matmul(features, w))
        return loss, tape.gradient(loss, w)

    batches = [np.full((4, 3), i, np.float32) for i in (1, 2)]
    for i, batch in zip((1, 2), strategy.experimental_distribute_dataset(batches)):
        loss, gradient = strategy.run(replica_step, args=(batch,))
        assert strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None).numpy() == 12.0 * i
        np.testing.assert_array_equal(strategy.reduce("SUM", gradient, axis=None).numpy().ravel(), [4.0 * i] * 3)
    assert replica_step.experimental_get_tracing_count() == 1

    calls = []

    @tf.function
    def distributed_step(features):
        calls.append(1)
        return strategy.reduce("SUM", strategy.run(tf.reduce_sum, args=(features,)), axis=None)

    for i, batch in zip((1, 2), strategy.experimental_distribute_dataset(batches)):
        assert distributed_step(batch).numpy() == 12.0 * i
    # The first call's trace stopped at strategy.run and ran the function eagerly; the second ran eagerly.
    assert len(calls) == 3
    assert distributed_step.experimental_get_tracing_count() == 0


def test_apply_gradients_in_run_updates_the_shared_variables_once():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        w = tf.Variable(np.array([1.0], np.float32))
        optimizer = tf.keras.optimizers.SGD(1.0)
    # Summed over the replicas: 0.25 + 0.75; then one update of the shared variable.
    per_replica = tf.distribute.PerReplica([tf.constant([0.25]), tf.constant([0.75])])
    strategy.run(lambda g: optimizer.apply_gradients([(g, w)]), args=(per_replica,))
    np.testing.assert_allclose(w.numpy(), [0.0])
    # Already aggregated: each replica passes the same gradient, applied once.
    strategy.run(lambda: optimizer.apply_gradients([(tf.constant([0.5]), w)], skip_gradients_aggregation=True))
    np.testing.assert_allclose(w.numpy(), [-0.5])
