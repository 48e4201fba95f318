"""Ctrl-C during fit from Python raises KeyboardInterrupt at the next step boundary (not the CLI's
checkpoint-and-exit), and the model is still usable afterwards."""
import json
import os
import signal
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import nimbus as tf
    keras = tf.keras

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = rng.integers(0, 4, 256).astype(np.int32)
    model = keras.Sequential([keras.layers.Dense(64, activation="relu", input_shape=(32,)), keras.layers.Dense(4)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    class Started(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 3 and not getattr(self, "said", False):  # steps have run: the signal lands mid-fit
                self.said = True
                print("fitting", flush=True)

    steps_per_epoch, epochs = 8, 100000  # far more than the signal lets run
    result = {}
    try:
        model.fit(x, y, batch_size=32, epochs=epochs, callbacks=[Started()], verbose=0)
        result["outcome"] = "finished"
    except KeyboardInterrupt:
        result["outcome"] = "KeyboardInterrupt"
    result["steps_before"] = int(model.optimizer.iterations.numpy())
    result["total_steps"] = steps_per_epoch * epochs
    # Still usable: evaluate, and fit again exactly one epoch more.
    result["loss"] = float(model.evaluate(x, y, verbose=0))
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    result["steps_after"] = int(model.optimizer.iterations.numpy())
    print(json.dumps(result), flush=True)
""")


def test_sigint_raises_keyboard_interrupt_out_of_fit():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=dict(os.environ))
    try:
        assert child.stdout.readline().strip() == "fitting"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["outcome"] == "KeyboardInterrupt"
    assert 4 <= result["steps_before"] < result["total_steps"]
    assert result["loss"] == result["loss"]  # not NaN
    assert result["steps_after"] == result["steps_before"] + 8
    assert "checkpoint" not in err.lower()  # not the CLI's preemption
