"""``TensorShape``: a tensor's dimensions, compared equal to tuples and lists as TensorFlow's is."""


class TensorShape(tuple):
    """The dimensions of a tensor; None marks a dimension not known until run time."""

    def __new__(cls, dims=()):
        return super().__new__(cls, tuple(None if d is None or d < 0 else int(d) for d in dims))

    @property
    def rank(self):
        return len(self)

    @property
    def ndims(self):
        return len(self)

    @property
    def dims(self):
        return list(self)

    def as_list(self):
        return list(self)

    def num_elements(self):
        """The number of elements, or None when a dimension is unknown."""
        count = 1
        for d in self:
            if d is None:
                return None
            count *= d
        return count

    def is_fully_defined(self):
        return all(d is not None for d in self)

    def __eq__(self, other):
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list)) else NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    def __repr__(self):
        return f"TensorShape({list(self)})"
