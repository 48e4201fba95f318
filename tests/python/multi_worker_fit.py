"""One run of test_multi_worker.py: the Fashion-MNIST MLP trained by fit under MultiWorkerMirroredStrategy
(`mpirun -np N python3 multi_worker_fit.py multi OUT`) or on one worker (`python3 multi_worker_fit.py single OUT`)
at the same global batch, from the same initial weights. Rank 0 saves the test accuracy and the weights to OUT
(.npz); every worker writes to OUT.worker-RANK.txt which of how many it is, the rows of a distributed batch
it got, and their sum and mean over the workers (files: mpirun may interleave the workers' stdout)."""
import sys

import numpy as np

import nimbus as tf
from fashion_mnist import load_data

GLOBAL_BATCH = 128
SAMPLES = 25600

mode, out = sys.argv[1], sys.argv[2]
tf.config.threading.set_intra_op_parallelism_threads(1)
(train_images, train_labels), (test_images, test_labels) = load_data()
train_images = (train_images[:SAMPLES] / 255.0).astype(np.float32)
test_images = (test_images / 255.0).astype(np.float32)

if mode == "multi":
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
else:
    strategy = tf.distribute.get_strategy()
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(scale=0.05, size=w.shape).astype(np.float32) for w in model.get_weights()])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])

history = model.fit(train_images, train_labels[:SAMPLES], batch_size=GLOBAL_BATCH, epochs=1, shuffle=False,
                    verbose=0)
task_id = strategy.cluster_resolver.task_id if mode == "multi" else 0
report = open(f"{out}.worker-{task_id}.txt", "w", encoding="utf-8")  # pylint: disable=consider-using-with
print(f"worker {task_id} of {strategy.num_replicas_in_sync}", file=report)
_, accuracy = model.evaluate(test_images, test_labels, verbose=0)

# A custom loop's pieces: each worker's share of a global batch of 8 rows, and a reduce over the workers.
for batch in strategy.experimental_distribute_dataset([np.arange(8, dtype=np.float32).reshape(8, 1)]):
    rows = strategy.run(lambda rows: rows, args=(batch,))
    print(f"worker {task_id} rows {[int(v) for v in rows.numpy().ravel()]}", file=report)
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.reduce_sum, args=(batch,)), axis=None)
    mean = strategy.reduce(tf.distribute.ReduceOp.MEAN, batch, axis=0)
    print(f"worker {task_id} sum {float(total.numpy())} mean {float(mean.numpy()[0])}", file=report)
report.close()
if task_id == 0:
    np.savez(out, accuracy=accuracy, loss=history.history["loss"][-1], *model.get_weights())
