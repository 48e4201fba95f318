"""``nimbus.keras.regularizers``: L1 and L2 weight penalties, under Keras's names.

A layer's ``kernel_regularizer=`` adds ``l1 * sum(|w|) + l2 * sum(w**2)`` to the
training loss; the engine computes it.
"""


class Regularizer:
    """A weight penalty ``l1 * sum(|w|) + l2 * sum(w**2)``."""

    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = float(l1)
        self.l2 = float(l2)

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def _config_json(self):
        return {"class_name": type(self).__name__, "config": self.get_config()}

    def __repr__(self):
        return f"{type(self).__name__}({self.get_config()})"


class L1L2(Regularizer):
    pass


class L1(Regularizer):
    def __init__(self, l1=0.01):
        super().__init__(l1=l1)

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    def __init__(self, l2=0.01):
        super().__init__(l2=l2)

    def get_config(self):
        return {"l2": self.l2}


def l1_l2(l1=0.01, l2=0.01):
    return L1L2(l1=l1, l2=l2)


l1, l2 = L1, L2

_BY_NAME = {"l1": L1, "l2": L2, "l1_l2": l1_l2, "l1l2": L1L2}


def get(identifier):
    """A regularizer from a name ('l2', Keras's default strength 0.01), a regularizer, or None."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown regularizer {identifier!r}; Nimbus has L1, L2 and L1L2 ('l1', 'l2', 'l1_l2')")


def serialize(regularizer):
    return {"class_name": type(regularizer).__name__, "config": regularizer.get_config()}


def _config_json(regularizer, owner, argument):
    """The layer-config form of ``regularizer`` (None for none); ValueError naming the layer otherwise."""
    try:
        made = get(regularizer)
    except ValueError as error:
        raise ValueError(f"{owner}: {argument}: {error}") from None
    return None if made is None else made._config_json()  # pylint: disable=protected-access
