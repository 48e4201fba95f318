"""``nimbus.data``: TensorFlow's tf.data over the engine's input pipeline (include/nimbus/data/dataset.h).

    dataset = nimbus.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(preprocess, num_parallel_calls=nimbus.data.AUTOTUNE).cache().batch(256)
    dataset = dataset.prefetch(nimbus.data.AUTOTUNE)
    model.fit(dataset, epochs=2)

``map`` and ``filter`` trace their function once, on symbolic tensors of the element's spec, into a
program the pipeline's threads replay without Python and without the GIL
(include/nimbus/data/element_function.h). docs/python.md, "nimbus.data", lists the differences from
TensorFlow.
"""
from nimbus.data.dataset import (AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, TextLineDataset,
                                 TFRecordDataset)

experimental = type("experimental", (), {"AUTOTUNE": AUTOTUNE, "INFINITE_CARDINALITY": INFINITE_CARDINALITY,
                                         "UNKNOWN_CARDINALITY": UNKNOWN_CARDINALITY})
