"""``nimbus.keras.initializers``: weight initializers by Keras's names and classes.

The engine draws the values (``Philox``, seeded per initializer when a seed is
given); these objects say which initializer a layer uses. Initializers the
engine lacks are not defined here, and ``Constant`` takes only 0 and 1.
"""
from nimbus import _nimbus


class Initializer:
    """An engine initializer: ``_engine_name`` is the engine's name for it."""

    _engine_name = ""

    def __init__(self, seed=None):
        self.seed = seed

    def __call__(self, shape, dtype=None):
        """A new tensor of ``shape`` drawn from this initializer."""
        return _nimbus.initialize(self._engine_name, self.seed, list(shape), dtype)

    def get_config(self):
        return {"seed": self.seed}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def _config_json(self):
        """The form layer configs hold: a name, or {"class_name", "config": {"seed"}} when seeded."""
        if self.seed is None:
            return self._engine_name
        return {"class_name": type(self).__name__, "config": {"seed": self.seed}}

    def __repr__(self):
        return f"{type(self).__name__}(seed={self.seed})"


class GlorotUniform(Initializer):
    _engine_name = "glorot_uniform"


class GlorotNormal(Initializer):
    _engine_name = "glorot_normal"


class HeNormal(Initializer):
    _engine_name = "he_normal"


class HeUniform(Initializer):
    _engine_name = "he_uniform"


class RandomUniform(Initializer):
    """Uniform in [minval, maxval): the engine's takes only Keras's default range [-0.05, 0.05)."""

    _engine_name = "uniform"

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        if (minval, maxval) != (-0.05, 0.05):
            raise ValueError(f"RandomUniform(minval={minval}, maxval={maxval}): Nimbus's RandomUniform draws "
                             "from Keras's default range [-0.05, 0.05) only")
        super().__init__(seed)

    def get_config(self):
        return {"minval": -0.05, "maxval": 0.05, "seed": self.seed}


class Zeros(Initializer):
    _engine_name = "zeros"

    def __init__(self):
        super().__init__(None)

    def get_config(self):
        return {}


class Ones(Zeros):
    _engine_name = "ones"


def Constant(value=0):  # pylint: disable=invalid-name  (Keras's class name)
    """Keras's Constant for the values the engine has: 0 (Zeros) and 1 (Ones)."""
    if value in (0, 1):
        return Zeros() if value == 0 else Ones()
    raise ValueError(f"Constant({value!r}): Nimbus's initializers fill constants 0 (Zeros) and 1 (Ones) only; "
                     "set other values after building with layer.set_weights")


# Keras's snake_case aliases.
glorot_uniform, glorot_normal, he_normal, he_uniform = GlorotUniform, GlorotNormal, HeNormal, HeUniform
random_uniform, zeros, ones, constant = RandomUniform, Zeros, Ones, Constant

_BY_NAME = {"glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "he_normal": HeNormal,
            "he_uniform": HeUniform, "random_uniform": RandomUniform, "uniform": RandomUniform, "zeros": Zeros,
            "ones": Ones}


def get(identifier):
    """An initializer from a name ('he_normal'), an initializer, or None."""
    if identifier is None or isinstance(identifier, Initializer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown initializer {identifier!r}; Nimbus has {', '.join(sorted(_BY_NAME))}")


def serialize(initializer):
    return {"class_name": type(initializer).__name__, "config": initializer.get_config()}


def _config_json(initializer, owner, argument):
    """The layer-config form of ``initializer``; ValueError naming ``owner`` and ``argument`` otherwise."""
    try:
        made = get(initializer)
    except ValueError as error:
        raise ValueError(f"{owner}: {argument}: {error}") from None
    if made is None:
        raise ValueError(f"{owner}: {argument}=None: give an initializer")
    return made._config_json()  # pylint: disable=protected-access
