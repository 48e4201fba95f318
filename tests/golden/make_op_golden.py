#!/usr/bin/python3
"""Writes tests/golden/op_golden.json: PyTorch's results for Nimbus's ops.

Run with Debian's PyTorch (python3-torch), from the repository root:

    /usr/bin/python3 tests/golden/make_op_golden.py > tests/golden/op_golden.json

Each entry names a Nimbus op and its attributes, gives the inputs, and holds
what torch computes in float64: the outputs, and the gradients of
L = sum_k sum(output_k * w_k) with respect to every floating input, with the
weights w_k stored too. tests/core/op_golden_test.cc replays every entry
through Nimbus's dispatcher and compares.

Adding an op is one line in ENTRIES: a name, the Nimbus op, its attributes,
input specs and the torch function that computes the same thing.

The file also holds a 10-step SGD trajectory of a tiny MLP (mlp_sgd).
"""

import json
import math
import random
import sys

import torch
import torch.nn.functional as F

# Bump when the file's layout changes; op_golden_test.cc checks it.
VERSION = 1
SEED = 20240611

# ---- attribute values, typed the way Nimbus's Attrs are ----


class Ints(list):
    """An int-list attribute (axes, perm)."""


class ShapeAttr(list):
    """A Shape attribute (reshape's and broadcast_to's target)."""


class DTypeAttr(str):
    """A dtype attribute, by Nimbus's name (f32, f64, f16, bf16, i32, i64, u8, bool)."""


def encode_attr(value):
    # bool before int: a Python bool is an int.
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    if isinstance(value, DTypeAttr):
        return {"dtype": str(value)}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, Ints):
        return {"ints": list(value)}
    if isinstance(value, ShapeAttr):
        return {"shape": list(value)}
    raise TypeError(f"attribute value {value!r} has no encoding")


# ---- inputs ----

TORCH_DTYPES = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "u8": torch.uint8,
    "bool": torch.bool,
}
NIMBUS_DTYPES = {v: k for k, v in TORCH_DTYPES.items()}


class Input:
    """How to draw one input. dtype "float" means: Nimbus runs it in the
    floating dtype under test (f64 against the reference kernels, f32 through
    the fast ones); torch always computes in float64."""

    def __init__(self, shape, dtype="float", low=-2.0, high=2.0, grid=None, fixed=None):
        self.shape, self.dtype, self.low, self.high, self.grid = list(shape), dtype, low, high, grid
        self.fixed = fixed

    def draw(self, rng):
        n = 1
        for d in self.shape:
            n *= d
        if self.fixed is not None:
            assert len(self.fixed) == n, f"{len(self.fixed)} values for shape {self.shape}"
            return list(self.fixed)
        if self.grid is not None:
            return [rng.choice(self.grid) for _ in range(n)]
        if self.dtype == "bool":
            return [rng.random() < 0.5 for _ in range(n)]
        if self.dtype != "float":
            return [rng.randrange(int(self.low), int(self.high)) for _ in range(n)]
        # Four decimals: exact enough to exercise the op, short in the file.
        return [round(rng.uniform(self.low, self.high), 4) for _ in range(n)]


def Fl(*shape, low=-2.0, high=2.0):
    return Input(shape, "float", low, high)


def Grid(*shape, values):
    """Floating values from a small set, so that ties occur (comparisons, max)."""
    return Input(shape, "float", grid=values)


def Fixed(*shape, values):
    """Exactly these floating values (special values: NaN, infinities, signed zeros)."""
    return Input(shape, "float", fixed=values)


def Int(*shape, low, high, dtype="i64"):
    return Input(shape, dtype, low, high)


def Bool(*shape):
    return Input(shape, "bool")


class Entry:
    def __init__(self, name, op, inputs, fn, attrs=None, distinct=False, gradient=True):
        self.name, self.op, self.inputs, self.fn = name, op, inputs, fn
        self.attrs = attrs or {}
        # Inputs 0 and 1 must differ everywhere (maximum / minimum: ties split differently).
        self.distinct = distinct
        # False for ops that Nimbus marks not differentiable although torch differentiates them.
        self.gradient = gradient


# ---- the table ----

BROADCAST = [
    ("same", (3, 4), (3, 4)),
    ("rows", (4, 5), (5,)),
    ("cols", (4, 1), (4, 3)),
    ("scalar", (2, 3), ()),
    ("both_sides", (3, 1, 2), (1, 4, 1)),
]


def binary_entries():
    entries = []
    plain = [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul)]
    for op, fn in plain:
        for suffix, a, b in BROADCAST:
            entries.append(Entry(f"{op}_{suffix}", op, [Fl(*a), Fl(*b)], fn))
    for suffix, a, b in BROADCAST:
        entries.append(Entry(f"div_{suffix}", "div", [Fl(*a), Fl(*b, low=0.5, high=2.0)], torch.div))
        entries.append(Entry(f"pow_{suffix}", "pow", [Fl(*a, low=0.5, high=2.0), Fl(*b, low=-1.5, high=1.5)],
                             torch.pow))
    for op, fn in [("maximum", torch.maximum), ("minimum", torch.minimum)]:
        for suffix, a, b in BROADCAST[:3]:
            entries.append(Entry(f"{op}_{suffix}", op, [Fl(*a), Fl(*b)], fn, distinct=True))
    entries.append(Entry("add_i64", "add", [Int(3, 4, low=-50, high=50), Int(4, low=-50, high=50)], torch.add))
    entries.append(Entry("mul_i32", "mul", [Int(3, 4, low=-50, high=50, dtype="i32")] * 2, torch.mul))
    return entries


def comparison_entries():
    entries = []
    ops = [("equal", torch.eq), ("not_equal", torch.ne), ("less", torch.lt), ("less_equal", torch.le),
           ("greater", torch.gt), ("greater_equal", torch.ge)]
    for op, fn in ops:
        # A grid of values makes ties, so equality is exercised in both directions.
        entries.append(Entry(f"{op}_bcast", op, [Grid(4, 5, values=[-1.0, 0.0, 0.5, 1.0]),
                                                 Grid(5, values=[-1.0, 0.0, 0.5, 1.0])], fn))
    entries.append(Entry("equal_i64", "equal", [Int(3, 4, low=0, high=3), Int(3, 1, low=0, high=3)], torch.eq))
    entries.append(Entry("logical_and", "logical_and", [Bool(3, 4), Bool(4)], torch.logical_and))
    entries.append(Entry("logical_or", "logical_or", [Bool(3, 4), Bool(3, 1)], torch.logical_or))
    entries.append(Entry("logical_not", "logical_not", [Bool(3, 4)], torch.logical_not))
    entries.append(Entry("where_same", "where", [Bool(3, 4), Fl(3, 4), Fl(3, 4)], torch.where))
    entries.append(Entry("where_bcast", "where", [Bool(3, 1), Fl(4), Fl(2, 3, 4)], torch.where))
    return entries


def unary_entries():
    # Domains avoid the points where a function or its derivative is undefined.
    unaries = [
        ("neg", torch.neg, -2, 2), ("exp", torch.exp, -2, 2), ("log", torch.log, 0.2, 3),
        ("sqrt", torch.sqrt, 0.2, 3), ("rsqrt", torch.rsqrt, 0.2, 3), ("abs", torch.abs, -2, 2),
        ("sign", torch.sign, -2, 2), ("square", torch.square, -2, 2), ("sin", torch.sin, -3, 3),
        ("cos", torch.cos, -3, 3), ("erf", torch.erf, -2.5, 2.5), ("relu", torch.relu, -2, 2),
        ("sigmoid", torch.sigmoid, -8, 8), ("tanh", torch.tanh, -3, 3),
        # torch's softplus turns linear above 20; stay below.
        ("softplus", F.softplus, -12, 12),
    ]
    entries = [Entry(op, op, [Fl(4, 5, low=low, high=high)], fn) for op, fn, low, high in unaries]
    entries.append(Entry("exp_scalar", "exp", [Fl()], torch.exp))
    for form in ["tanh", "none"]:
        entries.append(Entry(f"gelu_{form}", "gelu", [Fl(4, 6, low=-4, high=4)],
                             lambda x, form=form: F.gelu(x, approximate=form), {"approximate": form}))
        entries.append(Entry(f"gelu_backward_{form}", "gelu_backward", [Fl(4, 6), Fl(4, 6, low=-4, high=4)],
                             lambda g, x, form=form: torch.ops.aten.gelu_backward(g, x, approximate=form),
                             {"approximate": form}, gradient=False))
    entries.append(Entry("clip", "clip", [Fl(5, 4)], lambda x: torch.clamp(x, -1.0, 1.5),
                         {"low": -1.0, "high": 1.5}))
    entries.append(Entry("isfinite", "isfinite", [Fl(4, 3)], torch.isfinite))
    for dtype in ["f32", "f16", "bf16", "i32", "i64"]:
        entries.append(Entry(f"cast_to_{dtype}", "cast", [Fl(3, 5, low=-9, high=9)],
                             lambda x, dtype=dtype: x.to(TORCH_DTYPES[dtype]), {"dtype": DTypeAttr(dtype)}))
    entries.append(Entry("cast_i64_to_f64", "cast", [Int(3, 4, low=-9, high=9)], lambda x: x.to(torch.float64),
                         {"dtype": DTypeAttr("f64")}))
    entries.append(Entry("cast_bool_to_f64", "cast", [Bool(4, 4)], lambda x: x.to(torch.float64),
                         {"dtype": DTypeAttr("f64")}))
    entries.append(Entry("identity", "identity", [Fl(3, 4)], torch.clone))
    entries.append(Entry("stop_gradient", "stop_gradient", [Fl(3, 4)], lambda x: x.detach()))
    return entries


def all_axes(x):
    return tuple(range(x.dim()))


def reduction_entries():
    patterns = [
        ("all", (3, 4), [], False),
        ("axis0", (5, 3), [0], False),
        ("last_keep", (3, 6), [-1], True),
        ("middle", (2, 5, 3), [1], False),
        ("two_axes_keep", (2, 3, 4), [0, 2], True),
        ("size1_axis", (3, 1, 4), [1], False),
    ]
    reductions = [
        ("sum", lambda x, d, k: torch.sum(x, dim=d, keepdim=k)),
        ("mean", lambda x, d, k: torch.mean(x, dim=d, keepdim=k)),
        ("reduce_max", lambda x, d, k: torch.amax(x, dim=d, keepdim=k)),
        ("reduce_min", lambda x, d, k: torch.amin(x, dim=d, keepdim=k)),
        ("variance", lambda x, d, k: torch.var(x, dim=d, unbiased=False, keepdim=k)),
    ]
    entries = []
    for op, fn in reductions:
        for suffix, shape, axes, keep in patterns:
            if op == "variance" and suffix == "size1_axis":
                continue  # all zeros: nothing to compare
            entries.append(Entry(f"{op}_{suffix}", op, [Fl(*shape)],
                                 lambda x, fn=fn, axes=axes, keep=keep: fn(x, tuple(axes) or all_axes(x), keep),
                                 {"axes": Ints(axes), "keepdims": keep}))
    # Ties: both frameworks share the gradient equally among the maxima (minima).
    tie_grid = [0.0, 1.0, 2.0]
    entries.append(Entry("reduce_max_ties", "reduce_max", [Grid(4, 5, values=tie_grid)],
                         lambda x: torch.amax(x, dim=(1,)), {"axes": Ints([1]), "keepdims": False}))
    entries.append(Entry("reduce_min_ties", "reduce_min", [Grid(4, 5, values=tie_grid)],
                         lambda x: torch.amin(x, dim=(0,), keepdim=True), {"axes": Ints([0]), "keepdims": True}))
    entries.append(Entry("sum_i64", "sum", [Int(4, 5, low=-9, high=9)], lambda x: torch.sum(x, dim=1),
                         {"axes": Ints([1]), "keepdims": False}))
    entries.append(Entry("argmax_last", "argmax", [Fl(4, 7)], lambda x: torch.argmax(x, dim=-1),
                         {"axis": -1, "keepdims": False}))
    entries.append(Entry("argmax_axis0_keep", "argmax", [Fl(5, 3)], lambda x: torch.argmax(x, dim=0, keepdim=True),
                         {"axis": 0, "keepdims": True}))
    # The first of several maxima wins in both.
    entries.append(Entry("argmax_ties", "argmax", [Grid(6, 4, values=tie_grid)], lambda x: torch.argmax(x, dim=1),
                         {"axis": 1, "keepdims": False}))
    for op, fn in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        entries.append(Entry(f"{op}_last", op, [Fl(4, 7, low=-5, high=5)], lambda x, fn=fn: fn(x, -1), {"axis": -1}))
        entries.append(Entry(f"{op}_axis1_of_3", op, [Fl(2, 5, 3, low=-5, high=5)], lambda x, fn=fn: fn(x, 1),
                             {"axis": 1}))
    return entries


def shape_entries():
    return [
        Entry("reshape", "reshape", [Fl(2, 3, 4)], lambda x: x.reshape(6, 4), {"shape": ShapeAttr([6, 4])}),
        Entry("reshape_to_scalar", "reshape", [Fl(1, 1)], lambda x: x.reshape(()), {"shape": ShapeAttr([])}),
        Entry("transpose_2d", "transpose", [Fl(3, 5)], lambda x: x.permute(1, 0), {"perm": Ints([1, 0])}),
        Entry("transpose_3d", "transpose", [Fl(2, 3, 4)], lambda x: x.permute(2, 0, 1), {"perm": Ints([2, 0, 1])}),
        Entry("broadcast_to_rows", "broadcast_to", [Fl(4)], lambda x: torch.broadcast_to(x, (3, 4)),
              {"shape": ShapeAttr([3, 4])}),
        Entry("broadcast_to_size1", "broadcast_to", [Fl(3, 1, 2)], lambda x: torch.broadcast_to(x, (2, 3, 5, 2)),
              {"shape": ShapeAttr([2, 3, 5, 2])}),
        Entry("one_hot", "one_hot", [Int(2, 3, low=0, high=5)],
              lambda i: F.one_hot(i, 5).to(torch.float32),
              {"depth": 5, "dtype": DTypeAttr("f32"), "on": 1.0, "off": 0.0}),
        Entry("one_hot_on_off_i32", "one_hot", [Int(4, low=0, high=3, dtype="i32")],
              lambda i: F.one_hot(i.long(), 3).to(torch.float64) * (0.9 - 0.05) + 0.05,
              {"depth": 3, "dtype": DTypeAttr("f64"), "on": 0.9, "off": 0.05}),
        Entry("fill", "fill", [], lambda: torch.full((2, 3), 2.5, dtype=torch.float64),
              {"shape": ShapeAttr([2, 3]), "dtype": DTypeAttr("f64"), "value": 2.5}),
        Entry("range_f64", "range", [], lambda: torch.arange(1.0, 10.0, 1.5, dtype=torch.float64),
              {"start": 1.0, "stop": 10.0, "step": 1.5, "dtype": DTypeAttr("f64")}),
        Entry("range_i64_negative_step", "range", [], lambda: torch.arange(7, -6, -3, dtype=torch.int64),
              {"start": 7.0, "stop": -6.0, "step": -3.0, "dtype": DTypeAttr("i64")}),
    ]


def matmul_entries():
    patterns = [
        ("plain", (3, 4), (4, 5), False, False),
        ("ta", (4, 3), (4, 5), True, False),
        ("tb", (3, 4), (5, 4), False, True),
        ("ta_tb", (4, 3), (5, 4), True, True),
        ("batched", (2, 3, 4), (2, 4, 5), False, False),
        ("broadcast_batch", (2, 1, 3, 4), (3, 4, 2), False, False),
        ("weights_shared_tb", (2, 3, 4), (5, 4), False, True),
        ("broadcast_batch_ta", (1, 2, 4, 3), (3, 1, 4, 2), True, False),
    ]

    def matmul(a, b, ta, tb):
        return torch.matmul(a.transpose(-1, -2) if ta else a, b.transpose(-1, -2) if tb else b)

    return [Entry(f"matmul_{suffix}", "matmul", [Fl(*a), Fl(*b)],
                  lambda a, b, ta=ta, tb=tb: matmul(a, b, ta, tb), {"transpose_a": ta, "transpose_b": tb})
            for suffix, a, b, ta, tb in patterns]


def loss_entries():
    def sparse(logits, labels):
        classes = logits.shape[-1]
        losses = F.cross_entropy(logits.reshape(-1, classes), labels.reshape(-1).long(), reduction="none")
        return losses.reshape(labels.shape)

    return [
        Entry("sparse_softmax_cross_entropy", "sparse_softmax_cross_entropy",
              [Fl(5, 7, low=-4, high=4), Int(5, low=0, high=7)], sparse),
        Entry("sparse_softmax_cross_entropy_3d_i32", "sparse_softmax_cross_entropy",
              [Fl(2, 3, 4, low=-4, high=4), Int(2, 3, low=0, high=4, dtype="i32")], sparse),
        # Labels that do not sum to one exercise the sum(labels) term of the gradient.
        Entry("softmax_cross_entropy", "softmax_cross_entropy", [Fl(4, 6, low=-4, high=4), Fl(4, 6, low=0, high=1)],
              lambda logits, labels: F.cross_entropy(logits, labels, reduction="none")),
    ]


NAN, INF = float("nan"), float("inf")
SPECIALS = [NAN, INF, -INF, -0.0, 0.0, 1.5, -2.0]


def special_value_entries():
    """NaN and infinities must come out where torch has them (CONVENTIONS.md 7:
    NaN/Inf parity), e.g. an activation must not turn a NaN into a number.
    Gradients at these points mean little, so none are compared."""
    n = len(SPECIALS)

    def unary(name, op, fn, attrs=None):
        return Entry(f"{name}_special_values", op, [Fixed(n, values=SPECIALS)], fn, attrs, gradient=False)

    def binary(name, op, fn):
        # Every pair of special values: a (n, 1) against b (n).
        return Entry(f"{name}_special_values", op, [Fixed(n, 1, values=SPECIALS), Fixed(n, values=SPECIALS)], fn,
                     gradient=False)

    return [
        unary("relu", "relu", torch.relu),
        unary("abs", "abs", torch.abs),
        unary("sign", "sign", torch.sign),
        unary("exp", "exp", torch.exp),
        unary("log", "log", torch.log),
        unary("sqrt", "sqrt", torch.sqrt),
        unary("rsqrt", "rsqrt", torch.rsqrt),
        unary("sigmoid", "sigmoid", torch.sigmoid),
        unary("tanh", "tanh", torch.tanh),
        unary("softplus", "softplus", F.softplus),
        unary("erf", "erf", torch.erf),
        unary("gelu_tanh", "gelu", lambda x: F.gelu(x, approximate="tanh"), {"approximate": "tanh"}),
        unary("gelu_none", "gelu", lambda x: F.gelu(x, approximate="none"), {"approximate": "none"}),
        unary("clip", "clip", lambda x: torch.clamp(x, -1.0, 1.0), {"low": -1.0, "high": 1.0}),
        unary("isfinite", "isfinite", torch.isfinite),
        unary("cast_to_bool", "cast", lambda x: x.to(torch.bool), {"dtype": DTypeAttr("bool")}),
        unary("cast_to_f16", "cast", lambda x: x.to(torch.float16), {"dtype": DTypeAttr("f16")}),
        binary("add", "add", torch.add),
        binary("mul", "mul", torch.mul),
        binary("div", "div", torch.div),
        binary("maximum", "maximum", torch.maximum),
        binary("minimum", "minimum", torch.minimum),
        binary("less", "less", torch.lt),
        binary("equal", "equal", torch.eq),
        Entry("reduce_max_special_values", "reduce_max", [Fixed(3, 3, values=[1.0, NAN, 2.0, -INF, -INF, -INF,
                                                                            INF, 1.0, -0.0])],
              lambda x: torch.amax(x, dim=1), {"axes": Ints([1]), "keepdims": False}, gradient=False),
        Entry("reduce_min_special_values", "reduce_min", [Fixed(3, 3, values=[1.0, NAN, 2.0, INF, INF, INF,
                                                                            -INF, 1.0, 0.0])],
              lambda x: torch.amin(x, dim=1), {"axes": Ints([1]), "keepdims": False}, gradient=False),
        Entry("sum_special_values", "sum", [Fixed(3, 2, values=[INF, -INF, INF, 1.0, NAN, 0.0])],
              lambda x: torch.sum(x, dim=1), {"axes": Ints([1]), "keepdims": False}, gradient=False),
        Entry("argmax_special_values", "argmax", [Fixed(3, 3, values=[1.0, NAN, NAN, -INF, -INF, -INF,
                                                                     2.0, INF, INF])],
              lambda x: torch.argmax(x, dim=1), {"axis": 1, "keepdims": False}, gradient=False),
        Entry("softmax_special_values", "softmax", [Fixed(4, 2, values=[-INF, 0.0, INF, 1.0, NAN, 1.0, -INF, -INF])],
              lambda x: torch.softmax(x, -1), {"axis": -1}, gradient=False),
        Entry("log_softmax_special_values", "log_softmax", [Fixed(3, 2, values=[-INF, 0.0, INF, 1.0, NAN, 1.0])],
              lambda x: torch.log_softmax(x, -1), {"axis": -1}, gradient=False),
    ]


# ---- shape ops: concat, split, slice, pad, gather, scatter_add, tril, triu, top_k ----


def Indices(*shape, values, dtype="i64"):
    """Integer indices written out in the table (so that duplicates are certain)."""
    return Input(shape, dtype, fixed=values)


def split_torch(x, sizes, axis):
    known = sum(s for s in sizes if s != -1)
    return torch.split(x, [x.shape[axis] - known if s == -1 else s for s in sizes], axis)


def slice_torch(x, begin, size):
    return x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]


def pad_torch(x, paddings, value):
    # Nimbus lists (before, after) from the first axis; F.pad from the last.
    pairs = [paddings[i:i + 2] for i in range(0, len(paddings), 2)]
    return F.pad(x, [p for pair in reversed(pairs) for p in pair], value=value)


def gather_torch(params, indices, axis):
    axis %= params.dim()
    picked = torch.index_select(params, axis, indices.reshape(-1).long())
    return picked.reshape(params.shape[:axis] + indices.shape + params.shape[axis + 1:])


def scatter_add_torch(updates, indices, shape, axis):
    axis %= len(shape)
    flat = updates.reshape(list(shape[:axis]) + [indices.numel()] + list(shape[axis + 1:]))
    return torch.zeros(shape, dtype=updates.dtype).index_add(axis, indices.reshape(-1).long(), flat)


def stable_top_k(x, k):
    """A stable descending sort: equal values in index order and NaN above every number, Nimbus's (and TF's)
    order; torch.topk leaves the order of ties unspecified."""
    values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
    return values[..., :k], indices[..., :k]


def shape_op_entries():
    entries = [
        Entry("concat_axis0", "concat", [Fl(2, 3), Fl(1, 3), Fl(3, 3)], lambda *xs: torch.cat(xs, 0), {"axis": 0}),
        Entry("concat_middle", "concat", [Fl(2, 1, 4), Fl(2, 3, 4)], lambda *xs: torch.cat(xs, 1), {"axis": 1}),
        Entry("concat_last_negative", "concat", [Fl(3, 2), Fl(3, 4)], lambda *xs: torch.cat(xs, -1), {"axis": -1}),
        Entry("concat_i32", "concat", [Int(2, 2, low=-9, high=9, dtype="i32"), Int(2, 3, low=-9, high=9, dtype="i32")],
              lambda *xs: torch.cat(xs, 1), {"axis": 1}),
    ]
    for suffix, shape, sizes, axis in [("axis0", (6, 2), [1, 3, 2], 0), ("last_rest", (3, 7), [2, -1, 1], -1),
                                       ("middle", (2, 5, 3), [2, 3], 1)]:
        entries.append(Entry(f"split_{suffix}", "split", [Fl(*shape)],
                             lambda x, sizes=sizes, axis=axis: split_torch(x, sizes, axis),
                             {"sizes": Ints(sizes), "axis": axis}))
    for suffix, shape, begin, size in [("2d", (5, 6), [1, 2], [3, -1]), ("3d", (3, 4, 5), [0, 1, 2], [-1, 2, 2]),
                                       ("whole_rows", (5, 4), [2, 0], [2, 4])]:
        entries.append(Entry(f"slice_{suffix}", "slice", [Fl(*shape)],
                             lambda x, begin=begin, size=size: slice_torch(x, begin, size),
                             {"begin": Ints(begin), "size": Ints(size)}))
    for suffix, spec, paddings, value in [("2d", Fl(3, 4), [1, 2, 0, 1], 0.0),
                                          ("3d_value", Fl(2, 3, 2), [0, 1, 2, 0, 1, 1], 1.5),
                                          ("i32", Int(2, 3, low=-9, high=9, dtype="i32"), [1, 0, 0, 2], -3.0)]:
        entries.append(Entry(f"pad_{suffix}", "pad", [spec],
                             lambda x, paddings=paddings, value=value: pad_torch(x, paddings, value),
                             {"paddings": Ints(paddings), "value": value}))
    gathers = [
        ("rows_duplicates", Fl(5, 3), Indices(6, values=[4, 0, 4, 2, 0, 1]), 0),
        ("middle_2d_indices_i32", Fl(2, 4, 3), Indices(2, 3, values=[3, 1, 3, 0, 0, 2], dtype="i32"), 1),
        ("last_negative_axis", Fl(3, 5), Indices(4, values=[3, 3, 0, 1]), -1),
        ("scalar_index", Fl(4, 3), Indices(values=[2]), 0),
        ("i64_params", Int(4, 3, low=-50, high=50), Indices(3, values=[1, 3, 1]), 0),
    ]
    for suffix, params, indices, axis in gathers:
        entries.append(Entry(f"gather_{suffix}", "gather", [params, indices],
                             lambda p, i, axis=axis: gather_torch(p, i, axis), {"axis": axis}))
    scatters = [
        ("rows_duplicates", Fl(6, 3), Indices(6, values=[4, 0, 4, 2, 0, 1]), [5, 3], 0),
        ("middle_2d_indices_i32", Fl(2, 2, 3, 3), Indices(2, 3, values=[3, 1, 3, 0, 0, 2], dtype="i32"), [2, 4, 3], 1),
        ("last_negative_axis", Fl(3, 4), Indices(4, values=[2, 2, 0, 1]), [3, 3], -1),
        ("i64", Int(4, 2, low=-50, high=50), Indices(4, values=[1, 0, 1, 2]), [3, 2], 0),
    ]
    for suffix, updates, indices, shape, axis in scatters:
        entries.append(Entry(f"scatter_add_{suffix}", "scatter_add", [updates, indices],
                             lambda u, i, shape=shape, axis=axis: scatter_add_torch(u, i, shape, axis),
                             {"shape": ShapeAttr(shape), "axis": axis}))
    for op, fn in [("tril", torch.tril), ("triu", torch.triu)]:
        for suffix, shape, k in [("k0", (4, 5), 0), ("k1_batched", (2, 3, 4), 1), ("k_minus1_tall", (5, 3), -1),
                                 ("k2_wide", (3, 6), 2), ("k_minus2_batched", (2, 4, 4), -2)]:
            entries.append(Entry(f"{op}_{suffix}", op, [Fl(*shape)], lambda x, fn=fn, k=k: fn(x, k), {"k": k}))
    # Distinct values (four random decimals) in the entries with gradients: ties would leave the choice to torch.topk.
    for suffix, shape, k in [("rows", (4, 6), 3), ("3d_full_sort", (2, 3, 5), 5), ("k1", (5, 4), 1)]:
        entries.append(Entry(f"top_k_{suffix}", "top_k", [Fl(*shape)], lambda x, k=k: torch.topk(x, k, dim=-1),
                             {"k": k}))
    entries.append(Entry("top_k_ties", "top_k", [Grid(4, 6, values=[0.0, 1.0, 2.0])], lambda x: stable_top_k(x, 4),
                         {"k": 4}, gradient=False))
    entries.append(Entry("top_k_i32", "top_k", [Int(3, 6, low=-5, high=5, dtype="i32")], lambda x: stable_top_k(x, 2),
                         {"k": 2}))
    entries.append(Entry("top_k_special_values", "top_k",
                         [Fixed(2, 7, values=SPECIALS + [1.5, -INF, NAN, 0.0, INF, NAN, -0.0])],
                         lambda x: stable_top_k(x, 5), {"k": 5}, gradient=False))
    return entries


# ---- NN ops: convolution, pooling, batch and layer normalization ----


def same_padding(size, kernel, stride, dilation):
    """TF's "same" rule on one spatial axis: (before, after), the odd element after."""
    output = -(-size // stride)
    total = max((output - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def to_nchw(x, data_format):
    return x.permute(0, 3, 1, 2) if data_format == "NHWC" else x


def from_nchw(y, data_format):
    return y.permute(0, 2, 3, 1) if data_format == "NHWC" else y


def pad_image(x, kernel, strides, dilations, padding, value=0.0):
    """x (N, C, H, W), padded for TF's padding rule: torch's own padding is symmetric, TF's "same" need not be."""
    if padding == "valid":
        return x
    top, bottom = same_padding(x.shape[2], kernel[0], strides[0], dilations[0])
    left, right = same_padding(x.shape[3], kernel[1], strides[1], dilations[1])
    return F.pad(x, (left, right, top, bottom), value=value)


def conv2d_torch(x, w, attrs):
    data_format = attrs["data_format"]
    x = to_nchw(x, data_format)
    if data_format == "NHWC":
        w = w.permute(3, 2, 0, 1)  # Keras's (KH, KW, C/groups, F) to torch's (F, C/groups, KH, KW)
    x = pad_image(x, w.shape[2:], attrs["strides"], attrs["dilations"], attrs["padding"])
    y = F.conv2d(x, w, stride=attrs["strides"], dilation=attrs["dilations"], groups=attrs["groups"])
    return from_nchw(y, data_format)


def conv2d_backward_input_torch(grad_y, w, attrs):
    x = torch.zeros(attrs["input_shape"], dtype=torch.float64, requires_grad=True)
    return torch.autograd.grad(conv2d_torch(x, w, attrs), x, grad_y)[0]


def conv2d_backward_filter_torch(grad_y, x, attrs):
    w = torch.zeros(attrs["filter_shape"], dtype=torch.float64, requires_grad=True)
    return torch.autograd.grad(conv2d_torch(x, w, attrs), w, grad_y)[0]


def pool2d_torch(x, attrs, kind):
    data_format, size, strides = attrs["data_format"], attrs["pool_size"], attrs["strides"]
    x = to_nchw(x, data_format)

    def padded(t, value):
        return pad_image(t, size, strides, [1, 1], attrs["padding"], value)

    if kind == "max":
        y = F.max_pool2d(padded(x, -math.inf), size, strides)  # padded taps never win
    else:
        # TF divides by the taps inside the input: a sum pool over a count pool of ones.
        def sum_pool(t):
            return F.avg_pool2d(padded(t, 0.0), size, strides, divisor_override=1)

        y = sum_pool(x) / sum_pool(torch.ones_like(x))
    return from_nchw(y, data_format)


def pool2d_backward_torch(grad_y, x, attrs, kind):
    if x is None:
        x = torch.zeros(attrs["input_shape"], dtype=torch.float64)
    x = x.detach().requires_grad_(True)
    return torch.autograd.grad(pool2d_torch(x, attrs, kind), x, grad_y)[0]


def relu_bias_backward_torch(grad_y, y):
    grad_z = torch.where(y > 0, grad_y, torch.zeros_like(grad_y))
    return grad_z, grad_z.sum(dim=tuple(range(grad_z.dim() - 1)))


def relu_pool_backward_torch(grad_y, x, attrs, channel_sum_dims):
    grad_z = torch.where(x > 0, pool2d_backward_torch(grad_y, x, attrs, "max"), torch.zeros_like(x))
    return grad_z, grad_z.sum(dim=channel_sum_dims)


def output_shape(fn, *shapes):
    """The shape fn gives for inputs of these shapes (grad_y of the backward ops)."""
    return list(fn(*[torch.zeros(s, dtype=torch.float64) for s in shapes]).shape)


CONVOLUTIONS = [
    # suffix, x, filter, attributes other than the defaults
    ("nhwc_valid", (2, 4, 4, 3), (3, 3, 3, 2), {}),
    # Height pads (1, 1), width (0, 1): TF puts the odd padded column after.
    ("nhwc_same_stride2", (1, 5, 6, 2), (3, 3, 2, 3), {"strides": [2, 2], "padding": "same"}),
    # An even kernel height pads (0, 1); a dilated width pads (2, 2).
    ("nhwc_same_even_kernel_dilated", (1, 5, 6, 2), (2, 3, 2, 2), {"padding": "same", "dilations": [1, 2]}),
    ("nhwc_valid_dilated_stride", (1, 7, 6, 2), (2, 2, 2, 3), {"strides": [2, 1], "dilations": [2, 2]}),
    ("nhwc_groups2", (2, 4, 4, 4), (3, 2, 2, 4), {"strides": [1, 2], "padding": "same", "groups": 2}),
    # groups = C: depthwise, each input channel with its own two filters.
    ("nhwc_depthwise", (1, 5, 5, 3), (3, 3, 1, 6), {"strides": [2, 2], "padding": "same", "groups": 3}),
    ("nchw_valid_stride", (2, 3, 5, 4), (2, 3, 3, 2), {"strides": [2, 1], "data_format": "NCHW"}),
    # Height pads (0, 1), dilated width (2, 2).
    ("nchw_same_even_kernel_dilated_groups", (1, 4, 5, 5), (4, 2, 2, 3),
     {"padding": "same", "dilations": [1, 2], "groups": 2, "data_format": "NCHW"}),
]

POOLS = [
    # suffix, x, pool_size, strides, padding, data_format
    ("nhwc_2x2", (2, 4, 4, 2), [2, 2], [2, 2], "valid", "NHWC"),
    # Height pads (1, 1), width (0, 1); edge windows average fewer taps.
    ("nhwc_3x3_stride2_same", (1, 5, 6, 2), [3, 3], [2, 2], "same", "NHWC"),
    ("nhwc_overlap_stride1_same", (1, 4, 5, 2), [2, 3], [1, 1], "same", "NHWC"),
    ("nhwc_overlap_odd_valid", (1, 5, 5, 2), [3, 2], [1, 2], "valid", "NHWC"),
    ("nchw_2x2_stride1_same", (1, 2, 4, 5), [2, 2], [1, 1], "same", "NCHW"),
    ("nchw_3x3_stride2_valid", (2, 2, 5, 5), [3, 3], [2, 2], "valid", "NCHW"),
]


def conv_entries():
    entries = []
    for suffix, x, w, extra in CONVOLUTIONS:
        attrs = {"strides": Ints([1, 1]), "padding": "valid", "dilations": Ints([1, 1]), "groups": 1,
                 "data_format": "NHWC"}
        attrs.update({k: Ints(v) if isinstance(v, list) else v for k, v in extra.items()})
        y = output_shape(lambda x, w, attrs=attrs: conv2d_torch(x, w, attrs), x, w)
        entries.append(Entry(f"conv2d_{suffix}", "conv2d", [Fl(*x), Fl(*w)],
                             lambda x, w, attrs=attrs: conv2d_torch(x, w, attrs), attrs))
        input_attrs = dict(attrs, input_shape=ShapeAttr(x))
        entries.append(Entry(f"conv2d_backward_input_{suffix}", "conv2d_backward_input", [Fl(*y), Fl(*w)],
                             lambda g, w, attrs=input_attrs: conv2d_backward_input_torch(g, w, attrs), input_attrs,
                             gradient=False))
        filter_attrs = dict(attrs, filter_shape=ShapeAttr(w))
        entries.append(Entry(f"conv2d_backward_filter_{suffix}", "conv2d_backward_filter", [Fl(*y), Fl(*x)],
                             lambda g, x, attrs=filter_attrs: conv2d_backward_filter_torch(g, x, attrs), filter_attrs,
                             gradient=False))
    return entries


def pool_entries():
    entries = []
    for suffix, x, size, strides, padding, data_format in POOLS:
        attrs = {"pool_size": Ints(size), "strides": Ints(strides), "padding": padding, "data_format": data_format}
        y = output_shape(lambda x, attrs=attrs: pool2d_torch(x, attrs, "max"), x)
        for kind in ["max", "avg"]:
            entries.append(Entry(f"{kind}_pool2d_{suffix}", f"{kind}_pool2d", [Fl(*x)],
                                 lambda x, attrs=attrs, kind=kind: pool2d_torch(x, attrs, kind), attrs))
        entries.append(Entry(f"max_pool2d_backward_{suffix}", "max_pool2d_backward", [Fl(*y), Fl(*x)],
                             lambda g, x, attrs=attrs: pool2d_backward_torch(g, x, attrs, "max"), attrs,
                             gradient=False))
        # The gradient through max_pool2d(relu(z)) to z from x = relu(z), and its sum per channel.
        channel_sum_dims = (0, 1, 2) if data_format == "NHWC" else (0, 2, 3)
        entries.append(Entry(f"max_pool2d_relu_backward_{suffix}", "max_pool2d_relu_backward", [Fl(*y), Fl(*x)],
                             lambda g, x, attrs=attrs, dims=channel_sum_dims: relu_pool_backward_torch(g, x, attrs, dims),
                             attrs, gradient=False))
        avg_attrs = dict(attrs, input_shape=ShapeAttr(x))
        entries.append(Entry(f"avg_pool2d_backward_{suffix}", "avg_pool2d_backward", [Fl(*y)],
                             lambda g, attrs=avg_attrs: pool2d_backward_torch(g, None, attrs, "avg"), avg_attrs,
                             gradient=False))
    # Tied maxima: both send a window's gradient to its first maximum in row-major order.
    attrs = {"pool_size": Ints([2, 2]), "strides": Ints([1, 1]), "padding": "valid", "data_format": "NHWC"}
    entries.append(Entry("max_pool2d_backward_ties", "max_pool2d_backward",
                         [Fl(1, 3, 3, 2), Grid(1, 4, 4, 2, values=[0.0, 1.0])],
                         lambda g, x: pool2d_backward_torch(g, x, attrs, "max"), attrs, gradient=False))
    return entries


def channel_axis(x, data_format):
    return 1 if data_format == "NCHW" else x.dim() - 1


def per_channel(v, x, data_format):
    """(C) shaped to broadcast against x."""
    shape = [1] * x.dim()
    shape[channel_axis(x, data_format)] = -1
    return v.reshape(shape)


def batch_norm_training_torch(x, gamma, beta, epsilon, data_format):
    c = channel_axis(x, data_format)
    axes = [d for d in range(x.dim()) if d != c]
    # torch's channel axis is 1.
    y = F.batch_norm(x.movedim(c, 1), None, None, gamma, beta, training=True, eps=epsilon).movedim(1, c)
    return y, x.mean(axes), x.var(axes, unbiased=False)


def batch_norm_inference_torch(x, gamma, beta, mean, variance, epsilon, data_format):
    # Written out: F.batch_norm gives no gradient for the running statistics.
    def channel(v):
        return per_channel(v, x, data_format)

    return (x - channel(mean)) * torch.rsqrt(channel(variance) + epsilon) * channel(gamma) + channel(beta)


def batch_norm_backward_torch(grad_y, x, gamma, mean, variance, epsilon, data_format):
    c = channel_axis(x, data_format)
    grad_x, grad_gamma, grad_beta = torch.ops.aten.native_batch_norm_backward(
        grad_y.movedim(c, 1), x.movedim(c, 1), gamma, None, None, mean, torch.rsqrt(variance + epsilon), True,
        epsilon, [True, True, True])
    return grad_x.movedim(1, c), grad_gamma, grad_beta


def layer_norm_torch(x, gamma, beta, epsilon):
    y = F.layer_norm(x, x.shape[-1:], gamma, beta, epsilon)
    return y, x.mean(-1), torch.rsqrt(x.var(-1, unbiased=False) + epsilon)


def layer_norm_backward_torch(grad_y, x, gamma, mean, rstd):
    return torch.ops.aten.native_layer_norm_backward(grad_y, x, x.shape[-1:], mean.unsqueeze(-1), rstd.unsqueeze(-1),
                                                     gamma, torch.zeros_like(gamma), [True, True, True])


def normalization_entries():
    entries = []
    layouts = [("nhwc", (2, 3, 2, 3), 3, "NHWC"), ("nchw", (2, 3, 2, 3), 3, "NCHW"), ("rank2", (6, 4), 4, "NHWC"),
               ("rank3_channels_last", (3, 4, 3), 3, "NHWC")]
    for suffix, x, c, data_format in layouts:
        attrs = {"epsilon": 1e-3, "data_format": data_format}

        def scale():
            return Fl(c, low=0.5, high=2.0)

        def variance():
            return Fl(c, low=0.2, high=2.0)

        entries.append(Entry(f"batch_norm_training_{suffix}", "batch_norm_training", [Fl(*x), scale(), Fl(c)],
                             lambda x, g, b, f=data_format: batch_norm_training_torch(x, g, b, 1e-3, f), attrs))
        entries.append(Entry(f"batch_norm_inference_{suffix}", "batch_norm_inference",
                             [Fl(*x), scale(), Fl(c), Fl(c, low=-1.0, high=1.0), variance()],
                             lambda x, g, b, m, v, f=data_format: batch_norm_inference_torch(x, g, b, m, v, 1e-3, f),
                             attrs))
        # Statistics drawn apart from x: the backward formula holds for any mean and variance.
        entries.append(Entry(f"batch_norm_backward_{suffix}", "batch_norm_backward",
                             [Fl(*x), Fl(*x), scale(), Fl(c, low=-1.0, high=1.0), variance()],
                             lambda g, x, s, m, v, f=data_format: batch_norm_backward_torch(g, x, s, m, v, 1e-3, f),
                             attrs, gradient=False))
    for suffix, x, epsilon in [("rank2", (4, 6), 1e-3), ("rank3", (2, 3, 5), 1e-5)]:
        d = x[-1]
        entries.append(Entry(f"layer_norm_{suffix}", "layer_norm", [Fl(*x), Fl(d, low=0.5, high=2.0), Fl(d)],
                             lambda x, g, b, e=epsilon: layer_norm_torch(x, g, b, e), {"epsilon": epsilon}))
    entries.append(Entry("layer_norm_backward", "layer_norm_backward",
                         [Fl(4, 5), Fl(4, 5), Fl(5, low=0.5, high=2.0), Fl(4, low=-1.0, high=1.0),
                          Fl(4, low=0.5, high=2.0)],
                         layer_norm_backward_torch, gradient=False))
    return entries


def attention_torch(q, k, v, mask=None, scale=1.0, causal=False):
    """Attention as PyTorch 1.13 code writes it (no scaled_dot_product_attention there), and each row's logsumexp."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores + mask
    if causal:
        t, s = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(t, s, dtype=torch.bool).tril(), float("-inf"))
    return torch.matmul(torch.softmax(scores, -1), v), torch.logsumexp(scores, -1)


def attention_entries():
    entries = []
    for causal in [False, True]:
        suffix = "_causal" if causal else ""
        attrs = {"scale": 0.6, "causal": causal}
        entries.append(Entry(f"scaled_dot_product_attention{suffix}", "scaled_dot_product_attention",
                             [Fl(2, 2, 5, 4), Fl(2, 2, 5, 4), Fl(2, 2, 5, 3)],
                             lambda q, k, v, c=causal: attention_torch(q, k, v, scale=0.6, causal=c), attrs))
        entries.append(Entry(f"scaled_dot_product_attention_cross{suffix}", "scaled_dot_product_attention",
                             [Fl(1, 2, 3, 4), Fl(1, 2, 6, 4), Fl(1, 2, 6, 2)],
                             lambda q, k, v, c=causal: attention_torch(q, k, v, scale=0.6, causal=c), attrs))
    entries.append(Entry("scaled_dot_product_attention_masked", "scaled_dot_product_attention",
                         [Fl(2, 2, 4, 3), Fl(2, 2, 5, 3), Fl(2, 2, 5, 3), Fl(2, 1, 4, 5, low=-3.0, high=1.0)],
                         lambda q, k, v, m: attention_torch(q, k, v, m, scale=0.5), {"scale": 0.5, "causal": False}))
    return entries


# Nimbus ops without an entry, and why. op_golden_test.cc fails for an op in
# neither list, so a new op gets an entry (or a reason) here.
NO_TORCH_EQUIVALENT = {
    "fused_elementwise": "a composition of other ops' reference kernels by construction; OpForward and the graph fusion tests check it",
    "fused_conv2d": "conv2d, add and an activation on their reference kernels by construction (each has golden entries); OpForward checks oneDNN's fused kernel against it",
    "fused_matmul": "matmul, add and an activation on their reference kernels by construction (each has golden entries); OpForward checks oneDNN's fused kernel against it",
    "matmul_pair": "two matmuls on their reference kernels by construction (matmul has golden entries); OpForward checks the CPU's side-by-side kernel against it",
    "assign": "a state update, not a function: OpForward.SideEffects and the Variable tests check it",
    "random_normal": "Philox streams differ from torch's generators; rng_test.cc checks them",
    "random_uniform": "Philox streams differ from torch's generators; rng_test.cc checks them",
    "dropout_mask": "its bits come from a Philox stream, not torch's generators; nn_ops_test.cc checks the rate, "
                    "the 1 / (1 - rate) scale and reproducibility",
    "all_reduce": "a collective between replicas, the identity outside one; tests/distribute checks it against sums across replicas",
    "all_reduce_start": "hands a bucket to a replica's communication thread (nothing outside one); tests/distribute checks the overlapped sums",
    "all_reduce_wait": "a collective's result between replicas, the identity outside one; tests/distribute checks it against sums across replicas",
    "scaled_dot_product_attention_backward": "its out and logsumexp inputs must be the forward's results, which "
                                              "independent draws are not; the forward's entries check it through their gradients",
    "sparse_softmax_cross_entropy_backward": "the gradient of sparse_softmax_cross_entropy, which tapes and traces "
                                             "compute with it: that op's entries check it through their gradients",
    "adam_update": "a state update of many tensors, not a function: OpSideEffects, and tests/train/fused_adam_test.cc against the unfused Adam and AdamW ops",
}

def relu_bias_entries():
    """relu's gradient from its output y, and that gradient summed over all but the last axis (a bias
    gradient). Last in ENTRIES, so that the entries before keep their random inputs."""
    return [Entry(f"relu_bias_backward_rank{len(shape)}", "relu_bias_backward", [Fl(*shape), Fl(*shape)],
                  relu_bias_backward_torch, gradient=False) for shape in [(6, 5), (2, 3, 4)]]


ENTRIES = (binary_entries() + comparison_entries() + unary_entries() + reduction_entries() + shape_entries()
           + matmul_entries() + loss_entries() + special_value_entries() + shape_op_entries() + conv_entries()
           + pool_entries() + normalization_entries() + attention_entries() + relu_bias_entries())

# ---- evaluation ----


def encode_float(v):
    """JSON has no NaN or infinity: they are written as the strings "nan", "inf", "-inf"."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def values_of(t):
    if t.dtype == torch.bool:
        return [bool(v) for v in t.flatten().tolist()]
    if t.dtype.is_floating_point:
        return [encode_float(float(v)) for v in t.double().flatten().tolist()]
    return [int(v) for v in t.flatten().tolist()]


def evaluate(entry, rng):
    inputs, records = [], []
    for spec in entry.inputs:
        values = spec.draw(rng)
        if spec.dtype == "float":
            t = torch.tensor(values, dtype=torch.float64).reshape(spec.shape).requires_grad_(True)
        else:
            t = torch.tensor(values, dtype=TORCH_DTYPES[spec.dtype]).reshape(spec.shape)
        inputs.append(t)
        records.append({"shape": spec.shape, "dtype": spec.dtype,
                        "values": [encode_float(v) if isinstance(v, float) else v for v in values]})
    if entry.distinct:
        a, b = torch.broadcast_tensors(inputs[0].detach(), inputs[1].detach())
        if bool((a == b).any()):
            raise ValueError(f"{entry.name}: inputs tie; change SEED")

    outputs = entry.fn(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    floating_inputs = any(spec.dtype == "float" for spec in entry.inputs)
    out_records, weights, loss = [], [], None
    for out in outputs:
        # "float": the floating dtype of the run (the inputs'); anything else is fixed by the op.
        dtype = "float" if out.dtype == torch.float64 and floating_inputs else NIMBUS_DTYPES[out.dtype]
        values = values_of(out)
        if out.dtype.is_floating_point and out.numel() >= 8 and values.count(0.0) > 0.9 * out.numel():
            raise ValueError(f"{entry.name}: output is mostly zeros and would not exercise the op")
        out_records.append({"shape": list(out.shape), "dtype": dtype, "values": values})
        if out.dtype.is_floating_point:
            w = [round(rng.gauss(0.0, 1.0), 4) for _ in range(out.numel())]
            weights.append(w)
            term = (out.double() * torch.tensor(w, dtype=torch.float64).reshape(out.shape)).sum()
            loss = term if loss is None else loss + term
        else:
            weights.append(None)

    grads = [None] * len(inputs)
    floating = [i for i, t in enumerate(inputs) if t.requires_grad]
    if entry.gradient and loss is not None and floating:
        # A loss that depends on no input (stop_gradient) has zero gradients.
        computed = (torch.autograd.grad(loss, [inputs[i] for i in floating], allow_unused=True)
                    if loss.requires_grad else [None] * len(floating))
        for i, g in zip(floating, computed):
            grads[i] = values_of(g) if g is not None else [0.0] * inputs[i].numel()

    return {
        "name": entry.name,
        "op": entry.op,
        "attrs": {k: encode_attr(v) for k, v in entry.attrs.items()},
        "inputs": records,
        "outputs": out_records,
        "weights": weights,
        "grads": grads,
    }


def mlp_sgd_trajectory(rng):
    """A tiny model trained for a few steps: x (8, 4) -> dense(6) -> relu ->
    dense(3) -> mean sparse softmax cross-entropy, plain SGD. The losses and
    the final parameters check forward, gradients and updates together."""
    def tensor(shape, scale):
        n = math.prod(shape)
        return torch.tensor([round(rng.gauss(0.0, scale), 4) for _ in range(n)], dtype=torch.float64).reshape(shape)

    x = tensor((8, 4), 1.0)
    labels = torch.tensor([rng.randrange(3) for _ in range(8)], dtype=torch.int64)
    params = [tensor((4, 6), 0.5), tensor((6,), 0.1), tensor((6, 3), 0.5), tensor((3,), 0.1)]
    initial = [p.clone() for p in params]
    learning_rate, steps = 0.5, 10
    losses = []
    for _ in range(steps):
        for p in params:
            p.requires_grad_(True)
        w1, b1, w2, b2 = params
        loss = F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, labels)
        grads = torch.autograd.grad(loss, params)
        losses.append(loss.item())
        params = [(p - learning_rate * g).detach() for p, g in zip(params, grads)]

    def record(t):
        return {"shape": list(t.shape), "dtype": "float" if t.dtype.is_floating_point else NIMBUS_DTYPES[t.dtype],
                "values": values_of(t)}

    return {
        "x": record(x),
        "labels": record(labels),
        "params": [record(p) for p in initial],
        "learning_rate": learning_rate,
        "losses": losses,
        "final_params": [record(p) for p in params],
    }


def main():
    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    names = [e.name for e in ENTRIES]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate entry names: {sorted(duplicates)}")
    lines = [json.dumps(evaluate(e, rng), separators=(",", ":"), allow_nan=False) for e in ENTRIES]
    header = {
        "version": VERSION,
        "generator": "tests/golden/make_op_golden.py",
        "torch": torch.__version__,
        "seed": SEED,
        "no_torch_equivalent": NO_TORCH_EQUIVALENT,
        "mlp_sgd": mlp_sgd_trajectory(rng),
    }
    head = json.dumps(header, separators=(",", ":"), allow_nan=False)[:-1]
    sys.stdout.write(head + ',"entries":[\n' + ",\n".join(lines) + "\n]}\n")


if __name__ == "__main__":
    main()
