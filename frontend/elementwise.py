"""Elementwise ops with numpy broadcasting: arithmetic, comparisons, math, cast, where.

Each op composes the element expressions of its operands (no Func, no storage), so
chains of elementwise ops are inlined into whatever consumes them. Python scalars on
either side are weak literals (numpy 2 / torch promotion, as in the algorithm
language). Example::

    import schedlang.frontend as F
    x = F.Tensor(np.array([[-1.0, 2.0]], np.float32))
    F.where(x > 0, x, 0.1 * x).numpy()       # leaky relu: [[-0.1, 2.0]]
"""
from __future__ import annotations

import functools
import math

import numpy as np

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.algo import types as T

from .tensor import Tensor, is_scalar, scalar_key, shape_text


def _is_array_like(x):
    """numpy arrays, nested lists, and arrays of other libraries (torch, ...) that numpy
    can read: ``__array__``, ``__array_interface__`` or ``__dlpack__``."""
    return isinstance(x, (np.ndarray, list, tuple)) or any(
        hasattr(x, a) for a in ("__array__", "__array_interface__", "__dlpack__"))


def _kind(x):
    """``x``'s type as a user knows it: ``torch.Tensor``, ``str``."""
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"


def as_tensor(x, op=None):
    """A Tensor as is; a numpy array / list (or another library's array) as an eager
    constant Tensor. ``op`` names the op in the error for anything else."""
    if isinstance(x, Tensor):
        return x
    if _is_array_like(x):
        return _from_data(x, op)
    raise sl.AlgorithmError(f"{op + ': ' if op else ''}expected a Tensor or an array, got a "
                            f"{_kind(x)}; wrap data in Tensor(np.asarray(...))")


def broadcast_shapes(*shapes, op="broadcast", texts=None):
    """The numpy broadcast of ``shapes``; an ``sl.AlgorithmError`` naming them (``texts``:
    how to show each, e.g. ``"(3, 4) of A"``) if they do not broadcast. Example:
    ``broadcast_shapes((2, 1), (3,)) == (2, 3)``."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = {s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            shown = texts or [str(tuple(s)) for s in shapes]
            raise sl.AlgorithmError(f"{op}: shapes {', '.join(shown)} do "
                                    f"not broadcast (dimension {d - ndim}: sizes "
                                    f"{sorted(sizes)})")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_index(idx, src_shape, out_shape):
    """Index into a source of ``src_shape`` broadcast to ``out_shape``: leading output
    dims are dropped and size-1 source dims read index 0."""
    lead = len(out_shape) - len(src_shape)
    return [E.Const(0, T.int32) if n == 1 and out_shape[lead + d] != 1 else idx[lead + d]
            for d, n in enumerate(src_shape)]


def _from_data(x, op):
    """``Tensor(x)``, its error naming ``op``."""
    try:
        return Tensor(x)
    except sl.AlgorithmError as e:
        raise sl.AlgorithmError(f"{op}: {e}" if op else str(e)) from None


def _coerce(x, op):
    if isinstance(x, Tensor) or is_scalar(x):
        return x
    if _is_array_like(x):
        return _from_data(x, op)
    raise sl.AlgorithmError(f"{op}: cannot use a {_kind(x)} as a Tensor operand; use a Tensor, "
                            "a numpy array or a Python number")


def _strong_dtype(x):
    """The type of a Tensor or numpy scalar operand (Python numbers are weak: None)."""
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, np.generic):
        return T.from_numpy(x.dtype)
    return None


def needs_float64(dtypes) -> bool:
    """True when typed operands have no lossless common type (int64 / uint64 next to a
    float, uint64 next to a signed int): numpy then computes in float64, where the
    algorithm language would ask for an explicit cast."""
    dtypes = [d for d in dtypes if d is not None and not d.is_bool]
    if len(dtypes) < 2:
        return False
    try:
        functools.reduce(T.promote_types, dtypes)
    except sl.AlgorithmError:
        return True
    return False


def result_dtype(a, b):
    """The dtype of ``x + y`` for Tensors of dtypes ``a`` and ``b`` (numpy's promotion:
    float64 where ``needs_float64``). Example: ``result_dtype(sl.float16, sl.float32)``
    is float32."""
    return sl.float64 if needs_float64([a, b]) else T.promote_types(a, b)


def promote_operands(operands):
    """``operands`` with numpy's float64 promotion applied where ``needs_float64`` says so
    (bool operands, e.g. a ``where`` condition, are left alone).
    Example: ``promote_operands([int64_tensor, float32_tensor])`` casts both to float64."""
    if not needs_float64([_strong_dtype(x) for x in operands]):
        return list(operands)
    out = []
    for x in operands:
        d = _strong_dtype(x)
        if d is None or d.is_bool or d == sl.float64:
            out.append(x)
        elif isinstance(x, Tensor):
            out.append(cast(x, sl.float64))
        else:
            out.append(np.float64(x))
    return out


# ops where bool data next to a Python int computes in numpy's and torch's default int
_INT_ARITHMETIC = frozenset(["add", "sub", "mul", "floordiv", "mod", "pow", "bitwise_and",
                             "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
                             "maximum", "minimum", "clamp", "clamp_min", "clamp_max"])


def _bools_next_to_an_int_literal(op, operands):
    """``bool_tensor + 2`` is int64 in numpy and torch (a bool takes no literal's type):
    bool operands become int64 when the only other operands are Python ints."""
    if op not in _INT_ARITHMETIC:
        return operands
    return _bools_as_int64_beside_an_int(operands)


def _bools_as_int64_beside_an_int(operands):
    """``operands`` with bool ones cast to int64 when every typed operand is a bool and a
    Python int is among them (numpy's and torch's rule)."""
    typed = [_strong_dtype(x) for x in operands]
    if not (any(d is not None and d.is_bool for d in typed)
            and all(d is None or d.is_bool for d in typed)
            and any(type(x) is int for x in operands)):
        return operands
    return [cast(x, sl.int64) if isinstance(x, Tensor) and x.dtype.is_bool
            else np.int64(x) if isinstance(x, np.bool_) else x for x in operands]


# math worth computing once: an operand made of these, broadcast to many more elements
# than it has, is stored first (a + row.exp().log().tanh() recomputed the row's math for
# every row: 17x slower than numpy)
_COSTLY_CALLS = frozenset(["exp", "log", "tanh", "erf", "sin", "cos", "pow"])
_REUSE_TO_STORE = 4


def _stored_if_reused(x, shape):
    """``x``, or ``x`` stored in its own Func when broadcasting reads each of its elements
    ``_REUSE_TO_STORE`` times or more and it computes costly math."""
    out = int(np.prod(shape, dtype=np.int64))
    if x.func is not None or x.size == 0 or out < _REUSE_TO_STORE * x.size:
        return x
    costly = []
    E.walk_expr(x.element([sl.Var(f"i{d}") for d in range(x.ndim)]),
                lambda n: costly.append(n) if isinstance(n, E.Call)
                and n.name in _COSTLY_CALLS else None)
    if not costly:
        return x
    return Tensor.materialize("broadcast_operand", (), [x], x.shape, x.element, root=True)


def elementwise(op, fn, *operands, extra=(), promote=True):
    """Apply ``fn(*element_exprs)`` to Tensors / scalars with broadcasting.

    ``op`` and ``extra`` (hashable) identify the op in the kernel cache key; scalar
    operands are part of the key too. The result dtype is the dtype of ``fn``'s result.
    Typed operands promote as numpy does (``promote_operands``) unless ``promote`` is
    False (``fn`` then handles operands that have no common type itself).
    """
    operands = [_coerce(x, op) for x in operands]
    if promote:
        operands = promote_operands(_bools_next_to_an_int_literal(op, operands))
    tensors = [x for x in operands if isinstance(x, Tensor)]
    if not tensors:
        raise sl.AlgorithmError(f"{op}: at least one operand must be a Tensor")
    shape = broadcast_shapes(*(t.shape for t in tensors), op=op,
                             texts=[shape_text(t) for t in tensors])
    operands = [_stored_if_reused(x, shape) if isinstance(x, Tensor) else x for x in operands]
    tensors = [x for x in operands if isinstance(x, Tensor)]
    layout = tuple("T" if isinstance(x, Tensor) else scalar_key(x) for x in operands)

    def index_fn(idx):
        args = [x.element(broadcast_index(idx, x.shape, shape)) if isinstance(x, Tensor) else x
                for x in operands]
        return E.fix_weak(E.to_expr(fn(*args)))

    # the element types, from a symbolic call: a mistake the algorithm language finds
    # (a negative shift, a literal that does not fit) is reported as this op's, in the
    # operands' places: F.where(c, u8, -1) says "where: ... a, b, c"
    names = ["x"] if len(operands) == 1 else ["a", "b", "c", "d"][:len(operands)]
    try:
        probe = fn(*[E.Var(n, x.dtype) if isinstance(x, Tensor) else x
                     for n, x in zip(names, operands)])
        dtype = E.fix_weak(E.to_expr(probe)).dtype
    except sl.AlgorithmError as e:
        if str(e).startswith(f"{op}:"):
            raise
        # the algorithm language's advice "use sl.cast" is, on a Tensor, its .cast method
        text = str(e).replace("sl.cast", "Tensor.cast")
        raise sl.AlgorithmError(f"{op}: {text}") from None
    return Tensor.make(op, (layout, extra), tensors, shape, dtype, index_fn)


# ---------------------------------------------------------------------- arithmetic

def _is_bool(x):
    if isinstance(x, Tensor):
        return x.dtype.is_bool
    if isinstance(x, np.ndarray):
        return x.dtype == np.bool_
    return isinstance(x, (bool, np.bool_))


def _no_bool_arithmetic(op, *operands):
    """numpy and torch refuse ``-`` on bools (``+`` and ``*`` are ``or`` and ``and``)."""
    if all(_is_bool(x) for x in operands):
        raise sl.AlgorithmError(f"{op}: bool operands cannot be subtracted or negated (numpy and "
                                "torch refuse it too); use logical_xor / logical_not (^, ~), or "
                                "cast to an integer type first")


def add(a, b):
    """``a + b`` with broadcasting: ``F.add(x, 1)``. Two bool operands give their logical
    or, as in numpy and torch."""
    if _is_bool(a) and _is_bool(b):
        return elementwise("add", lambda p, q: p | q, a, b)
    return elementwise("add", lambda p, q: p + q, a, b)


def sub(a, b):
    """``a - b`` with broadcasting: ``F.sub(x, y)``."""
    _no_bool_arithmetic("sub", a, b)
    return elementwise("sub", lambda p, q: p - q, a, b)


def mul(a, b):
    """``a * b`` with broadcasting: ``F.mul(x, 2.0)``. Two bool operands give their logical
    and, as in numpy and torch."""
    if _is_bool(a) and _is_bool(b):
        return elementwise("mul", lambda p, q: p & q, a, b)
    return elementwise("mul", lambda p, q: p * q, a, b)


def _true_div(p, q):
    """Integer (or bool) operands divide in float64, as numpy's true division does: a
    float32 quotient would round int32 values above 2**24."""
    p, q = E.to_expr(p), E.to_expr(q)
    if not (p.dtype.is_float or q.dtype.is_float):
        p, q = E.unify("div", p, q)
        p, q = E.cast(sl.float64, p), E.cast(sl.float64, q)
    return E.true_div(p, q)


def div(a, b):
    """``a / b``: true division; integer operands give float64, as in numpy:
    ``F.div(x, y)``."""
    return elementwise("div", _true_div, a, b)


def floordiv(a, b):
    """``a // b``: floor division (Python semantics for integers): ``F.floordiv(x, 3)``."""
    return elementwise("floordiv", lambda p, q: p // q, a, b)


def mod(a, b):
    """``a % b``: modulo with the divisor's sign (Python semantics): ``F.mod(x, 3)``."""
    return elementwise("mod", lambda p, q: p % q, a, b)


def pow(a, b):  # noqa: A001 - the op's name
    """``a ** b``; integer operands give an exact integer power that wraps (as numpy),
    floats a float one. Example: ``x ** 2``, ``2 ** n`` or ``F.pow(x, y)``."""
    def fn(p, q):
        q = E.to_expr(q)
        if E.is_weak(q) and not q.dtype.is_float and q.value < 0 and \
                not E.to_expr(p).dtype.is_float:
            raise sl.AlgorithmError(f"pow: an integer tensor to the negative power {q.value} is "
                                    "not an integer (numpy refuses it too); cast the tensor to a "
                                    "float type first")
        if E.is_weak(q) and q.dtype.is_float and q.value == 0.5 and E.to_expr(p).dtype.is_float:
            # numpy and torch compute x ** 0.5 as sqrt(x): -0.0 and -inf give -0.0 and nan,
            # where C's pow gives +0.0 and +inf
            return sl.sqrt(p)
        return p ** q
    return elementwise("pow", fn, a, b)


def neg(x):
    """``-x``: ``F.neg(x)``."""
    _no_bool_arithmetic("neg", x)
    return elementwise("neg", lambda p: -p, x)


def abs(x):  # noqa: A001
    """Absolute value (integers stay integers; bools stay as they are, as numpy's):
    ``F.abs(x)``."""
    x = _coerce(x, "abs")
    if isinstance(x, Tensor) and x.dtype.is_bool:
        return x
    return elementwise("abs", lambda p: sl.abs(p), x)


def maximum(a, b):
    """Elementwise maximum of two operands (a NaN in either is the result, as numpy and
    torch; ``sl.max`` has that semantics): ``F.maximum(x, 0)``."""
    return elementwise("maximum", lambda p, q: sl.max(p, q), a, b)


def minimum(a, b):
    """Elementwise minimum of two operands (NaN propagates): ``F.minimum(x, 6)``."""
    return elementwise("minimum", lambda p, q: sl.min(p, q), a, b)


def clamp(x, min=None, max=None):  # noqa: A002 - torch's argument names
    """``min(max(x, min), max)`` elementwise (a NaN stays NaN); either bound may be left
    out, as torch. Example: ``F.clamp(x, 0, 6)`` or ``x.clamp(min=0)``."""
    lo, hi = min, max
    if lo is None and hi is None:
        raise sl.AlgorithmError("clamp: give at least one of min and max")
    if hi is None:
        return elementwise("clamp_min", lambda p, a: sl.max(p, a), x, lo)
    if lo is None:
        return elementwise("clamp_max", lambda p, b: sl.min(p, b), x, hi)
    return elementwise("clamp", lambda p, a, b: sl.clamp(p, a, b), x, lo, hi)


# ---------------------------------------------------------------------- comparisons

_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _mixed_sign_64(da, db):
    """uint64 against a signed integer: no integer type holds both (numpy compares them
    exactly all the same; a float64 comparison would merge values above 2**53)."""
    if da is None or db is None or not (da.is_int and db.is_int):
        return False
    return (da == sl.uint64 and db.is_signed) or (db == sl.uint64 and da.is_signed)


def _exact_mixed_compare(op, p, q):
    """``p op q`` for a uint64 and a signed integer, exactly: a negative signed value is
    below every unsigned one; otherwise both compare as uint64."""
    p, q = E.to_expr(p), E.to_expr(q)
    if p.dtype.is_signed:
        p, q, op = q, p, _MIRRORED[op]
    neg = E.binary("lt", q, E.cast(q.dtype, 0))
    same = E.binary(op, p, E.cast(sl.uint64, q))
    if op in ("gt", "ge", "ne"):
        return E.binary("or", neg, same)
    return E.binary("and", E.binary("ge", q, E.cast(q.dtype, 0)), same)


def _typed_if_out_of_range(x, other):
    """A Python int literal ``x`` that the integer (or bool) type of Tensor ``other`` cannot
    hold, as a typed int64 / uint64 scalar: numpy 2 compares such a literal by value
    (``uint8_tensor > -1`` is all True), where as a weak literal it would not fit."""
    if type(x) is not int or not isinstance(other, Tensor):
        return x
    # next to a bool a literal is an int32 (and a bool compares as a number, as numpy's)
    d = sl.int32 if other.dtype.is_bool else other.dtype
    if not d.is_int or d.min_value() <= x <= d.max_value():
        return x
    if -2**63 <= x < 2**63:
        return np.int64(x)
    return np.uint64(x) if 0 <= x < 2**64 else x


def _compare(op, a, b):
    pa, pb = _coerce(a, op), _coerce(b, op)
    pa, pb = _typed_if_out_of_range(pa, pb), _typed_if_out_of_range(pb, pa)
    if _mixed_sign_64(_strong_dtype(pa), _strong_dtype(pb)):
        return elementwise(op, lambda p, q: _exact_mixed_compare(op, p, q), pa, pb,
                           promote=False)
    return elementwise(op, lambda p, q: E.binary(op, p, q), pa, pb)


def lt(a, b):
    """``a < b`` as a bool Tensor: ``F.lt(x, 0)``."""
    return _compare("lt", a, b)


def le(a, b):
    """``a <= b`` as a bool Tensor: ``F.le(x, y)``."""
    return _compare("le", a, b)


def gt(a, b):
    """``a > b`` as a bool Tensor: ``F.gt(x, 0)``."""
    return _compare("gt", a, b)


def ge(a, b):
    """``a >= b`` as a bool Tensor: ``F.ge(x, y)``."""
    return _compare("ge", a, b)


def eq(a, b):
    """``a == b`` as a bool Tensor (``x == y`` on Tensors is this op): ``F.eq(x, 1)``."""
    return _compare("eq", a, b)


def ne(a, b):
    """``a != b`` as a bool Tensor: ``F.ne(x, 0)``."""
    return _compare("ne", a, b)


def _truth(e):
    """An element as a bool: itself for bool, ``e != 0`` otherwise (numpy / torch)."""
    e = E.to_expr(e)
    return e if e.dtype.is_bool else E.binary("ne", e, 0)


def logical_and(a, b):
    """Elementwise logical and, a bool Tensor (non-zero is true, as numpy / torch).
    Example: ``F.logical_and(x > 0, x < 1)``."""
    return elementwise("logical_and", lambda p, q: _truth(p) & _truth(q), a, b)


def logical_or(a, b):
    """Elementwise logical or, a bool Tensor: ``F.logical_or(x < 0, x > 1)``."""
    return elementwise("logical_or", lambda p, q: _truth(p) | _truth(q), a, b)


def logical_xor(a, b):
    """Elementwise logical xor, a bool Tensor: ``F.logical_xor(x > 0, y > 0)``."""
    return elementwise("logical_xor", lambda p, q: _truth(p) ^ _truth(q), a, b)


def logical_not(x):
    """Elementwise logical not, a bool Tensor (``x == 0`` for numbers): ``F.logical_not(m)``."""
    return elementwise("logical_not", lambda p: ~_truth(p), x)


def _integer_op(op, sym, fn, a, b):
    """An integer-only binary op: operands with no common integer type (int64 next to
    uint64) are refused here, as numpy does, naming their types rather than the float64
    that ``+`` would promote them to."""
    a, b = _coerce(a, op), _coerce(b, op)
    types = [_strong_dtype(a), _strong_dtype(b)]
    if all(t is not None and t.is_int for t in types) and needs_float64(types):
        raise sl.AlgorithmError(
            f"{op}: {types[0].name} {sym} {types[1].name} has no common integer type (numpy "
            f"refuses it too); cast one side first, e.g. F.cast(b, sl.{types[0].name})")
    return elementwise(op, fn, a, b)


def bitwise_and(a, b):
    """``a & b``: bitwise for integers, logical for bool: ``(x > 0) & (x < 1)``."""
    return _integer_op("bitwise_and", "&", lambda p, q: p & q, a, b)


def bitwise_or(a, b):
    """``a | b``: bitwise for integers, logical for bool: ``(x < 0) | (x > 1)``."""
    return _integer_op("bitwise_or", "|", lambda p, q: p | q, a, b)


def bitwise_xor(a, b):
    """``a ^ b``: bitwise for integers, logical for bool: ``m ^ n``."""
    return _integer_op("bitwise_xor", "^", lambda p, q: p ^ q, a, b)


def bitwise_not(x):
    """``~x``: bitwise not for integers, logical not for bool: ``~(x > 0)``."""
    return elementwise("bitwise_not", lambda p: ~p, x)


def left_shift(a, b):
    """``a << b`` for integers: ``x << 2``."""
    return _integer_op("left_shift", "<<", lambda p, q: p << q, a, b)


def right_shift(a, b):
    """``a >> b`` for integers (arithmetic for signed types): ``x >> 1``."""
    return _integer_op("right_shift", ">>", lambda p, q: p >> q, a, b)


# ---------------------------------------------------------------------- math

def _numpy_float(dtype):
    """The float type numpy computes a math function of ``dtype`` in: the smallest that
    holds every value (bool and 8-bit ints: float16, 16-bit: float32, wider: float64)."""
    if dtype.is_float:
        return dtype
    bits = 8 if dtype.is_bool else dtype.bits
    return {8: sl.float16, 16: sl.float32}.get(bits, sl.float64)


def _math(name, x):
    """A math function numpy has (exp, log, sqrt, sin, cos, tanh): integer and bool
    arguments give numpy's float type (``_numpy_float``)."""
    def fn(p):
        p = E.to_expr(p)
        wide = _numpy_float(p.dtype)
        if wide != p.dtype:
            # computed in float32 at least, then rounded once (float16 has no libm)
            work = sl.float64 if wide == sl.float64 else sl.float32
            return sl.cast(wide, getattr(sl, name)(sl.cast(work, p)))
        return getattr(sl, name)(p)
    return elementwise(name, fn, x)


def _torch_math(name, x):
    """A math function numpy does not have (erf, rsqrt): torch's rule, integers and bools
    give float32."""
    return elementwise(name, lambda p: getattr(sl, name)(_float(E.to_expr(p))), x)


def exp(x):
    """``e**x`` (integers as numpy: int32 gives float64, int8 float16): ``F.exp(x)``."""
    return _math("exp", x)


def log(x):
    """Natural logarithm (integers as numpy's ``log``): ``F.log(x)``."""
    return _math("log", x)


def sqrt(x):
    """Square root (integers as numpy's ``sqrt``): ``F.sqrt(x)``."""
    return _math("sqrt", x)


def rsqrt(x):
    """``1 / sqrt(x)`` (integers become float32, as torch): ``F.rsqrt(x)``."""
    return _torch_math("rsqrt", x)


def sin(x):
    """Sine (integers as numpy's ``sin``): ``F.sin(x)``."""
    return _math("sin", x)


def cos(x):
    """Cosine (integers as numpy's ``cos``): ``F.cos(x)``."""
    return _math("cos", x)


def tanh(x):
    """Hyperbolic tangent (integers as numpy's ``tanh``): ``F.tanh(x)``."""
    return _math("tanh", x)


def erf(x):
    """The error function (integers become float32, as torch): ``F.erf(x)``."""
    return _torch_math("erf", x)


def floor(x):
    """Round down; integers and bools are returned unchanged, as numpy and torch do.
    Example: ``F.floor(x)``."""
    x = as_tensor(x, "floor")
    return x if not x.dtype.is_float else _math("floor", x)


def ceil(x):
    """Round up; integers and bools are returned unchanged, as numpy and torch do.
    Example: ``F.ceil(x)``."""
    x = as_tensor(x, "ceil")
    return x if not x.dtype.is_float else _math("ceil", x)


def _float(e):
    return e if e.dtype.is_float else sl.cast(sl.float32, e)


def in_float32(fn, x, *args):
    """``fn`` of a float16 / bfloat16 Tensor ``x`` computed in float32 and rounded once, as
    torch does (in 16 bits, statistics lose most digits and composite math such as
    ``1 + erf(x)`` cancels); of anything else, ``fn(x)`` as is. Tensor arguments (a
    layernorm's weight and bias) are widened too."""
    if not isinstance(x, Tensor) or x.dtype not in (sl.float16, sl.bfloat16):
        return fn(x, *args)
    wide = [cast(a, sl.float32) if isinstance(a, Tensor) else a for a in args]
    return cast(fn(cast(x, sl.float32), *wide), x.dtype)


def sigmoid(x):
    """``1 / (1 + exp(-x))`` (integers become float32; float16 / bfloat16 computed in
    float32, rounded once): ``F.sigmoid(x)``."""
    return in_float32(_sigmoid, _coerce(x, "sigmoid"))


def _sigmoid(x):
    """The sigmoid in ``x``'s own float type."""
    return elementwise("sigmoid", lambda p: 1.0 / (1.0 + sl.exp(-_float(E.to_expr(p)))), x)


def relu(x):
    """``max(x, 0)``, keeping the dtype (NaN stays NaN, as torch): ``F.relu(x)``."""
    if _is_bool(x):
        raise sl.AlgorithmError("relu: bool input is not supported (torch refuses it too); "
                                "cast it to a number type first: F.relu(x.cast(sl.int32))")
    return elementwise("relu", lambda p: sl.select(p < 0, 0, p), x)


def gelu(x, approximate="none"):
    """GELU, exact erf form as torch's default: ``0.5 * x * (1 + erf(x / sqrt(2)))``;
    ``approximate="tanh"`` is torch's tanh form (float16 / bfloat16 computed in float32,
    rounded once). Example: ``F.gelu(x)``."""
    if approximate not in ("none", "tanh"):
        raise sl.AlgorithmError(f"gelu: approximate must be 'none' or 'tanh' (as torch), got "
                                f"{approximate!r}")
    return in_float32(_gelu, _coerce(x, "gelu"), approximate)


def _gelu(x, approximate="none"):
    """GELU in ``x``'s own float type."""
    inv_sqrt2 = 1.0 / math.sqrt(2.0)
    sqrt_2_over_pi = math.sqrt(2.0 / math.pi)

    def fn(p):
        p = _float(E.to_expr(p))
        if approximate == "tanh":
            return 0.5 * p * (1.0 + sl.tanh(sqrt_2_over_pi * (p + 0.044715 * p * p * p)))
        return 0.5 * p * (1.0 + sl.erf(p * inv_sqrt2))
    return elementwise("gelu" if approximate == "none" else "gelu_tanh", fn, x)


def cast(x, dtype):
    """Convert to ``dtype`` with C semantics (float to int truncates, narrowing wraps).
    Example: ``F.cast(x, sl.int32)`` or ``x.cast(sl.float16)``."""
    if isinstance(dtype, Tensor) and not isinstance(x, Tensor):
        # sl.cast's order (dtype first) used here
        raise sl.AlgorithmError("cast: the Tensor comes first, then the dtype: "
                                "F.cast(x, sl.int8) or x.cast(sl.int8)")
    try:
        dtype = T.as_dtype(dtype)
    except sl.AlgorithmError as e:
        raise sl.AlgorithmError(f"cast: {e}") from None
    return elementwise("cast", lambda p: sl.cast(dtype, p), x, extra=(dtype.name,))


def where(cond, a, b):
    """``a`` where ``cond`` holds, else ``b``, with broadcasting of all three; a number
    condition holds where it is nonzero, as numpy's. Example: ``F.where(x > 0, x, 0)``."""
    def fn(c, p, q):
        return sl.select(E.to_expr(c), p, q)
    cond = _coerce(cond, "where")
    if isinstance(cond, Tensor) and not cond.dtype.is_bool:
        cond = ne(cond, 0)      # before the promotion: the condition's type is not the result's
    elif not isinstance(cond, Tensor):
        cond = bool(cond)
    # F.where(c, bool_tensor, 0) is int64, as np.where and torch.where (the condition
    # takes no part in the result's type); so is F.where(c, 1, 0)
    a, b = _bools_as_int64_beside_an_int([_coerce(a, "where"), _coerce(b, "where")])
    if all(isinstance(v, (bool, int)) and -2**63 <= v < 2**63 for v in (a, b)) and not all(
            isinstance(v, bool) for v in (a, b)):
        a, b = np.int64(a), np.int64(b)
    return elementwise("where", fn, cond, a, b)
