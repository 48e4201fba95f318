"""``nimbus.keras.mixed_precision``: dtype policies (``Policy``, ``set_global_policy``).

A policy says in which dtype a layer computes and in which its variables live:
"float32" (the default), "mixed_float16" and "mixed_bfloat16" (float32
variables, float16 / bfloat16 computation). Layers take the global policy when
they are made, or their ``dtype=`` argument. Dtypes are given as strings, as
Keras gives them.
"""
from nimbus import _nimbus

NAMES = ("float32", "mixed_float16", "mixed_bfloat16")


class Policy:
    """A dtype policy by name: ``Policy('mixed_bfloat16')``."""

    def __init__(self, name):
        if isinstance(name, Policy):
            name = name.name
        if name not in NAMES:
            raise ValueError(f"Policy: unknown policy {name!r}; Nimbus has {', '.join(NAMES)}")
        self._policy = _nimbus.DTypePolicy(name)

    @property
    def name(self):
        return self._policy.name

    @property
    def compute_dtype(self):
        return self._policy.compute_dtype.name

    @property
    def variable_dtype(self):
        return self._policy.variable_dtype.name

    def get_config(self):
        return {"name": self.name}

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f'<Policy "{self.name}">'


DTypePolicy = Policy  # Keras 3's name


def set_global_policy(policy):
    """Sets the policy of layers made from now on; None restores "float32"."""
    _nimbus.set_global_policy(Policy(policy or "float32").name)


def global_policy():
    return Policy(_nimbus.global_policy().name)
