"""Tensor frontend: lazy Tensors whose ops lower to schedlang algorithm Funcs (SPEC §5).

Every op is both a function here and a method of ``Tensor`` (``F.relu(x)`` and
``x.relu()``), except ``F.where(c, a, b)``. Ops build pure algorithm Funcs and
expressions; ``sl.compile(tensor)`` compiles a result (kernel arguments are the names
given to ``Tensor.input``; the data of eager ``Tensor(array)`` constants is bound) and
``tensor.numpy()`` builds, compiles, caches and runs.
Example::

    import schedlang as sl
    import schedlang.frontend as F
    from schedlang.frontend import Tensor
    x = Tensor.input("x", (1, 3, 16, 16)); w = Tensor.input("w", (8, 3, 3, 3))
    kern = sl.compile(F.conv2d(x, w, padding=1).relu())
    y = kern(x=np.ones((1, 3, 16, 16), np.float32), w=np.ones((8, 3, 3, 3), np.float32))
    z = (Tensor(a) @ Tensor(b)).softmax(-1).numpy()
"""
from .elementwise import (abs, add, as_tensor, bitwise_and, bitwise_not,  # noqa: F401,A004
                          bitwise_or, bitwise_xor, broadcast_shapes, cast, ceil, clamp, cos,
                          div, eq, erf, exp, floor, floordiv, ge, gelu, gt, le, left_shift, log,
                          logical_and, logical_not, logical_or, logical_xor, lt, maximum,
                          minimum, mod, mul, ne, neg, pow, relu, right_shift, rsqrt, sigmoid,
                          sin, sqrt, sub, tanh, where)
from .nn import (avg_pool2d, conv2d, layer_norm, layernorm, log_softmax, matmul, max,  # noqa: F401,A004
                 max_pool2d, mean, min, softmax, sum)
from .shape_ops import (concat, expand, flatten, getitem, pad, permute, reshape,  # noqa: F401
                        squeeze, transpose, unsqueeze)
from .shape_ops import slice_ as slice  # noqa: A004 - the op's name
from .tensor import Tensor, cache_info, clear_cache  # noqa: F401
from .tensor import topo_order as _topo_order
from .tensor import with_argument_check as _with_argument_check

__all__ = [
    "Tensor", "as_tensor", "broadcast_shapes", "cache_info", "clear_cache", "where",
    "abs", "add", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cast", "ceil",
    "clamp", "cos", "div", "eq", "erf", "exp", "floor", "floordiv", "ge", "gelu", "gt", "le",
    "left_shift", "log", "logical_and", "logical_not", "logical_or", "logical_xor", "lt",
    "maximum", "minimum", "mod", "mul", "ne", "neg", "pow", "relu", "right_shift", "rsqrt",
    "sigmoid", "sin", "sqrt", "sub", "tanh", "avg_pool2d", "conv2d", "layer_norm", "layernorm",
    "log_softmax", "matmul", "max", "max_pool2d", "mean", "min", "softmax", "sum", "concat",
    "expand", "flatten", "getitem", "pad", "permute", "reshape", "slice", "squeeze",
    "transpose", "unsqueeze",
]

# every op, as function and as method, refuses arguments it cannot take with an
# AlgorithmError that names it
for _name in __all__:
    if _name not in ("Tensor", "cache_info", "clear_cache"):
        globals()[_name] = _with_argument_check(globals()[_name], _name)
Tensor.__init__ = _with_argument_check(Tensor.__init__, "Tensor", bound_first=True)
Tensor.input = classmethod(_with_argument_check(Tensor.input.__func__, "Tensor.input",
                                                   bound_first=True))

# Methods of Tensor: name -> function whose first argument is the tensor.
_METHODS = {
    "abs": abs, "cast": cast, "ceil": ceil, "clamp": clamp, "cos": cos, "erf": erf, "exp": exp,
    "floor": floor, "gelu": gelu, "log": log, "relu": relu, "rsqrt": rsqrt,
    "sigmoid": sigmoid, "sin": sin, "sqrt": sqrt, "tanh": tanh, "maximum": maximum,
    "minimum": minimum, "add": add, "sub": sub, "mul": mul, "div": div,
    "sum": sum, "max": max, "min": min, "mean": mean, "matmul": matmul, "softmax": softmax,
    "log_softmax": log_softmax, "layernorm": layernorm, "layer_norm": layer_norm,
    "conv2d": conv2d, "max_pool2d": max_pool2d, "avg_pool2d": avg_pool2d,
    "reshape": reshape, "permute": permute, "transpose": transpose, "expand": expand,
    "pad": pad, "concat": concat, "flatten": flatten, "squeeze": squeeze, "unsqueeze": unsqueeze,
    "getitem": getitem, "slice": slice,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "floordiv": floordiv, "mod": mod, "pow": pow, "neg": neg,
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not, "left_shift": left_shift,
    "right_shift": right_shift,
}


def _iter(self):
    """Iterate over the first dimension (``for row in t``), as numpy."""
    if not self.shape:
        raise TypeError("iteration over a 0-d Tensor")
    return (getitem(self, i) for i in range(self.shape[0]))


def _bound_arguments(self):
    """The arrays of the eager constants (``Tensor(array)``) the graph reads, by input name:
    ``sl.compile(tensor)`` binds them, so its kernel takes only the ``Tensor.input`` names."""
    return {n.input_node.name: n.array for n in _topo_order(self) if n.array is not None}


_OPERATORS = {
    "__add__": add, "__sub__": sub, "__mul__": mul, "__truediv__": div,
    "__floordiv__": floordiv, "__mod__": mod, "__pow__": pow, "__matmul__": matmul,
    "__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge, "__eq__": eq, "__ne__": ne,
    "__and__": bitwise_and, "__or__": bitwise_or, "__xor__": bitwise_xor,
    "__lshift__": left_shift, "__rshift__": right_shift, "__pos__": lambda self: self,
    "__neg__": neg, "__abs__": abs, "__invert__": bitwise_not, "__getitem__": getitem,
}

_REFLECTED = {"__radd__": add, "__rsub__": sub, "__rmul__": mul, "__rtruediv__": div,
              "__rfloordiv__": floordiv, "__rmod__": mod, "__rpow__": pow,
              "__rmatmul__": matmul, "__rand__": bitwise_and, "__ror__": bitwise_or,
              "__rxor__": bitwise_xor, "__rlshift__": left_shift, "__rrshift__": right_shift}


def _divmod(self, other):
    """``divmod(t, other)``: ``(t // other, t % other)``, as numpy."""
    return floordiv(self, other), mod(self, other)


def _rdivmod(self, other):
    """``divmod(other, t)``."""
    return floordiv(other, self), mod(other, self)


def _reflected(fn):
    def method(self, other):
        return fn(other, self)
    method.__doc__ = f"``other {fn.__name__} self`` (reflected operator)."
    return method


for _name, _fn in {**_METHODS, **_OPERATORS, "__iter__": _iter, "__divmod__": _divmod,
                   "__rdivmod__": _rdivmod,
                   "__schedlang_arguments__": _bound_arguments}.items():
    setattr(Tensor, _name, _fn)
for _name, _fn in _REFLECTED.items():
    setattr(Tensor, _name, _reflected(_fn))
Tensor.T = property(lambda self: permute(self, *reversed(range(self.ndim))),
                    doc="The tensor with its dims reversed (for 2-D: the transpose).")
Tensor.__hash__ = object.__hash__
del _name, _fn
