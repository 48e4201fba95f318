"""``nimbus.nest``: nested structures of lists, tuples, namedtuples and dicts (``tf.nest``).

Everything else is a leaf. Dicts are walked in sorted key order, as TensorFlow
walks them, so a structure flattens the same way however it was built.
"""


def _is_namedtuple(value):
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def is_nested(structure):
    """Whether ``structure`` is a list, tuple or dict (not a leaf)."""
    return isinstance(structure, (list, tuple, dict))


def _children(structure):
    if isinstance(structure, dict):
        return [structure[key] for key in sorted(structure)]
    return list(structure)


def flatten(structure):
    """The leaves of ``structure``, depth first; a leaf alone gives ``[leaf]``."""
    if not is_nested(structure):
        return [structure]
    leaves = []
    for child in _children(structure):
        leaves.extend(flatten(child))
    return leaves


def _pack(structure, leaves):
    """``structure`` rebuilt from the iterator ``leaves``."""
    if not is_nested(structure):
        return next(leaves)
    children = [_pack(child, leaves) for child in _children(structure)]
    if isinstance(structure, dict):
        return type(structure)(zip(sorted(structure), children))
    if _is_namedtuple(structure):
        return type(structure)(*children)
    return type(structure)(children)


def pack_sequence_as(structure, flat_sequence):
    """``structure`` with its leaves replaced, in order, by those of ``flat_sequence``."""
    flat_sequence = list(flat_sequence)
    count = len(flatten(structure))
    if count != len(flat_sequence):
        raise ValueError(f"the structure has {count} leaves, the flat sequence {len(flat_sequence)} elements")
    return _pack(structure, iter(flat_sequence))


def map_structure(func, *structures):
    """``func`` applied to the leaves of ``structures`` (of one shape), in the shape of the first."""
    if not structures:
        raise ValueError("map_structure needs at least one structure")
    flats = [flatten(structure) for structure in structures]
    if any(len(flat) != len(flats[0]) for flat in flats):
        raise ValueError("the structures passed to map_structure have different numbers of leaves")
    return pack_sequence_as(structures[0], [func(*leaves) for leaves in zip(*flats)])
