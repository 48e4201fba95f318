"""``compile``, ``fit``, ``evaluate`` and ``predict`` of ``nimbus.keras.Model``, over the engine's trainer."""


class TrainingMixin:
    """Keras's training methods; ``Model`` and ``Sequential`` take them from here."""
