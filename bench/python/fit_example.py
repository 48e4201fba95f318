"""model.fit from Python on an example config's model, data and settings: the Python side of
bench/python/fit_vs_cli.sh. Prints the trainer's own throughput (History.samples_per_sec: samples/s of
the training steps after the first 20, validation left out), the figure `nimbus train` writes to
summary.json as samples_per_sec.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/fit_example.py CONFIG EPOCHS [STEPS_PER_EPOCH]
"""
import gzip
import json
import sys

import numpy as np
import yaml

import nimbus as tf

keras = tf.keras


def idx(path, offset):
    with gzip.open(path) as file:
        return np.frombuffer(file.read(), np.uint8, offset=offset)


def main(config_path, epochs, steps_per_epoch):
    config = yaml.safe_load(open(config_path))
    model_config, compile_config, runtime = config["model"], config["compile"], config["runtime"]
    # The CLI's idx source: images / 255 as float32 in the model's input shape, labels as class ids.
    images = idx(config["data"]["train"]["images"], 16).reshape([-1, *model_config["input_shape"]])
    x = (images / np.float32(255)).astype(np.float32)
    y = idx(config["data"]["train"]["labels"], 8).astype(np.int32)

    model = keras.Sequential([keras.Input(model_config["input_shape"])])
    for layer in model_config["layers"]:
        (class_name, layer_config), = layer.items()
        model.add(getattr(keras.layers, class_name)(**layer_config))  # the config's keys are Keras's arguments
    optimizer = compile_config["optimizer"]
    loss = compile_config["loss"]
    assert optimizer["name"] == "adam" and loss["name"] == "sparse_categorical_crossentropy"
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=optimizer["learning_rate"]),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=loss["from_logits"]),
                  metrics=compile_config["metrics"], jit_compile=runtime["jit"], run_eagerly=not runtime["graph"])
    history = model.fit(x, y, batch_size=config["fit"]["batch_size"], epochs=epochs,
                        steps_per_epoch=steps_per_epoch, verbose=0)
    print(json.dumps({"samples_per_sec": history.samples_per_sec, "loss": history.history["loss"][-1]}))


if __name__ == "__main__":
    steps = sys.argv[3] if len(sys.argv) > 3 else "null"
    main(sys.argv[1], int(sys.argv[2]), None if steps == "null" else int(steps))
