"""Expression trees of the algorithm language (and, extended by ``lower/``, of loop IR).

Nodes are immutable; operators on them build new nodes with SPEC §1's typing rules
(weak Python literals, lossless widening). ``==`` builds a comparison, so nodes hash
by identity; ``structural_key(e)`` gives a hashable structural identity.
Example: ``i = Var("i"); e = (i + 1) * 2`` is an int32 expression.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..deep_recursion import deep_recursion
from ..errors import AlgorithmError
from . import types as T
from .types import DType

CMP_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
BOOL_OPS = ("and", "or")
ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max",
             "bitand", "bitor", "bitxor", "shl", "shr")
SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
          "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>",
          "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "and": "&&", "or": "||", "pow": "**"}
MATH_FUNCS = ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil", "erf",
              "abs", "pow")


class ExprOps:
    """Operator overloading shared by expressions and expression-like objects (1-D RDoms)."""

    __slots__ = ()
    # a numpy scalar or array on the left of an operator defers to the reflected method,
    # which keeps the numpy type (np.float64(2) + x is float64, as x + np.float64(2) is);
    # numpy itself would turn the scalar into a weak Python float inside an object loop
    __array_ufunc__ = None

    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return true_div(self, o)
    def __rtruediv__(self, o): return true_div(o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("mod", self, o)
    def __rmod__(self, o): return binary("mod", o, self)
    def __pow__(self, o): return power(self, o)
    def __rpow__(self, o): return power(o, self)
    def __and__(self, o): return bitwise("bitand", self, o)
    def __rand__(self, o): return bitwise("bitand", o, self)
    def __or__(self, o): return bitwise("bitor", self, o)
    def __ror__(self, o): return bitwise("bitor", o, self)
    def __xor__(self, o): return bitwise("bitxor", self, o)
    def __rxor__(self, o): return bitwise("bitxor", o, self)
    def __lshift__(self, o): return shift("shl", self, o)
    def __rlshift__(self, o): return shift("shl", o, self)
    def __rshift__(self, o): return shift("shr", self, o)
    def __rrshift__(self, o): return shift("shr", o, self)
    def __neg__(self): return negate(self)
    def __pos__(self): return to_expr(self)
    def __invert__(self): return invert(self)
    def __abs__(self): return call_math("abs", self)
    def __lt__(self, o): return binary("lt", self, o)
    def __le__(self, o): return binary("le", self, o)
    def __gt__(self, o): return binary("gt", self, o)
    def __ge__(self, o): return binary("ge", self, o)
    def __eq__(self, o): return binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return binary("ne", self, o)  # type: ignore[override]
    __hash__ = object.__hash__

    def __bool__(self):
        raise AlgorithmError(
            f"the expression {to_expr(self)} has no Python truth value; use sl.select(...) "
            "for a choice and & / | instead of 'and' / 'or'")


class Expr(ExprOps):
    """Base of every expression node; ``dtype`` is its DType."""

    # _key / _vars / _flags: structural_key, the Var names and node_flags, cached (nodes
    # never change in place); _fixed: the lowering simplifier leaves this node as it is
    __slots__ = ("dtype", "_key", "_vars", "_flags", "_fixed")
    children: tuple = ()

    @deep_recursion(AlgorithmError, "printing an expression")
    def __repr__(self):
        from .printer import expr_to_str
        return expr_to_str(self)

    __str__ = __repr__

    def kids(self):
        """The child expressions, in field order. (The common node kinds override this with
        a tuple of their fields: the compiler's walks call it for every node.)"""
        if not self.children:
            return ()
        return tuple(getattr(self, f) for f in self.children)

    def with_kids(self, kids):
        """A copy of this node with its child expressions replaced."""
        if all(a is b for a, b in zip(kids, self.kids())):
            return self
        cls = type(self)
        new = object.__new__(cls)
        for s in _data_slots(cls):
            try:
                object.__setattr__(new, s, getattr(self, s))
            except AttributeError:      # a slot this node never set
                pass
        for f, k in zip(self.children, kids):
            object.__setattr__(new, f, k)
        return new


_CACHE_SLOTS = ("_key", "_vars", "_flags", "_fixed")


def _all_slots(cls):
    out = []
    for c in cls.__mro__:
        out.extend(getattr(c, "__slots__", ()))
    return out


_DATA_SLOTS = {}


def _data_slots(cls):
    """The slots ``with_kids`` copies: all but the caches and the children (per class)."""
    hit = _DATA_SLOTS.get(cls)
    if hit is None:
        hit = _DATA_SLOTS[cls] = tuple(s for s in _all_slots(cls)
                                       if s not in _CACHE_SLOTS and s not in cls.children)
    return hit


class Const(Expr):
    """A literal. ``weak`` marks a bare Python number whose type is not fixed yet."""

    __slots__ = ("value", "weak")

    def __init__(self, value, dtype: DType, weak: bool = False):
        if dtype.is_float:
            value = float(value)
        elif dtype.is_bool:
            value = bool(value)
        else:
            value = int(value)
        self.value, self.dtype, self.weak = value, dtype, weak


class Var(Expr):
    """A named integer variable: a pure dimension of a Func, or a loop / let variable."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype: DType = T.int32):
        if not isinstance(name, str) or not name:
            raise AlgorithmError(f"a Var needs a non-empty str name, got {name!r}")
        if "\x00" in name:
            check_no_nul(type(self).__name__, name)
        self.name, self.dtype = name, dtype


def check_no_nul(kind, name):
    """Names become symbols of the generated code, where a NUL ends them."""
    if "\x00" in name:
        raise AlgorithmError(f"the {kind} name {name!r} contains a NUL character ('\\x00'), "
                             "which generated code cannot hold; pick a name without it")


class RVar(Var):
    """One dimension of an RDom: a reduction variable."""

    __slots__ = ("rdom", "dim")

    def __init__(self, name, rdom, dim):
        super().__init__(name, T.int32)
        self.rdom, self.dim = rdom, dim


class SizeVar(Var):
    """A symbolic size (``"M"`` in an Input's shape); int64, bound from argument shapes.
    ``source`` is the Input whose shape defines it (None for an output-only size)."""

    __slots__ = ("source",)

    def __init__(self, name, source=None):
        super().__init__(name, T.int64)
        self.source = source


class Param(Var):
    """A scalar argument of the kernel: ``alpha = sl.Param("alpha", sl.float32)``."""

    __slots__ = ()

    def __init__(self, name: str, dtype=T.float32):
        super().__init__(name, T.as_dtype(dtype))
        check_argument_name("Param", name)


def check_argument_name(kind, name):
    """A kernel takes Inputs and Params as keyword arguments, and ``out=`` for the output
    array: an argument named ``out`` could never be passed."""
    if name == "out":
        raise AlgorithmError(f"the {kind} name 'out' is reserved: a kernel takes the output array "
                             f"as out=...; pick another name for the {kind}")


class BinOp(Expr):
    __slots__ = ("op", "a", "b")
    children = ("a", "b")

    def kids(self):
        return (self.a, self.b)

    def with_kids(self, kids):
        a, b = kids
        if a is self.a and b is self.b:
            return self
        new = object.__new__(BinOp)
        new.op, new.a, new.b, new.dtype = self.op, a, b, self.dtype
        return new

    def __init__(self, op, a, b, dtype=None):
        self.op, self.a, self.b = op, a, b
        self.dtype = dtype or (T.bool_.with_lanes(a.dtype.lanes) if op in CMP_OPS else a.dtype)


class UnOp(Expr):
    """``neg`` (arithmetic negation) or ``not`` (bitwise not; logical not on bool)."""

    __slots__ = ("op", "a")
    children = ("a",)

    def kids(self):
        return (self.a,)

    def __init__(self, op, a):
        self.op, self.a, self.dtype = op, a, a.dtype


class Select(Expr):
    __slots__ = ("cond", "t", "f")
    children = ("cond", "t", "f")

    def kids(self):
        return (self.cond, self.t, self.f)

    def __init__(self, cond, t, f):
        self.cond, self.t, self.f, self.dtype = cond, t, f, t.dtype


class Cast(Expr):
    __slots__ = ("value",)
    children = ("value",)

    def kids(self):
        return (self.value,)

    def __init__(self, dtype, value):
        self.dtype, self.value = dtype, value


class Call(Expr):
    """A pure math function (``exp``, ``pow``, ...) applied elementwise."""

    __slots__ = ("name", "args")
    children = ("args",)

    def __init__(self, name, args, dtype):
        self.name, self.args, self.dtype = name, tuple(args), dtype

    def kids(self):
        return self.args

    def with_kids(self, kids):
        kids = tuple(kids)
        if all(a is b for a, b in zip(kids, self.args)):
            return self
        return Call(self.name, kids, self.dtype)


class FuncRef(Expr):
    """A read of a Func or Input at an index: ``A[i, k]``. ``via`` is the inlined Func
    whose definition the read came from (so errors can name it)."""

    __slots__ = ("func", "args", "via")

    def __init__(self, func, args, via=None):
        self.func, self.args, self.dtype, self.via = func, tuple(args), func.dtype, via

    def kids(self):
        return self.args

    def with_kids(self, kids):
        kids = tuple(kids)
        if all(a is b for a, b in zip(kids, self.args)):
            return self
        return FuncRef(self.func, kids, self.via)


class Reduce(Expr):
    """An inline reduction (``sl.sum(...)``) over the RDom ``rdom``.

    ``op`` is one of sum / product / maximum / minimum / argmax / argmin.
    """

    __slots__ = ("op", "body", "rdom")
    children = ("body",)

    def kids(self):
        return (self.body,)

    def __init__(self, op, body, rdom, dtype):
        self.op, self.body, self.rdom, self.dtype = op, body, rdom, dtype


# ----------------------------------------------------------------------------- building

def to_expr(x) -> Expr:
    """Turn a Python number, bool, numpy scalar, Expr or 1-D RDom into an Expr (Python
    numbers become weak literals; numpy scalars keep their dtype)."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, np.generic):
        # numpy scalars are typed, not weak (NEP 50): np.float64 is a Python float subclass
        return Const(x.item(), T.from_numpy(x.dtype))
    if isinstance(x, bool):
        return Const(x, T.bool_)
    if isinstance(x, int):
        return Const(x, T.int32, weak=True)
    if isinstance(x, float):
        return Const(x, T.float32, weak=True)
    conv = getattr(x, "as_expr", None)
    if conv is not None:
        return conv()
    raise AlgorithmError(f"cannot use {x!r} ({type(x).__name__}) in an expression; use a number, "
                         "a Var, a Param or a Func / Input read")


def is_weak(e):
    return isinstance(e, Const) and e.weak


def cast(dtype, e) -> Expr:
    """``sl.cast(sl.int32, x)``: convert with C semantics: float to int truncates toward
    zero, narrowing ints wrap, float16 / bfloat16 round to nearest even (once). A float
    beyond the range of a 32-bit int (of a 64-bit one for 64-bit types), or NaN, converts as
    numpy's casts do on x86 (``float_to_int_bits``): ``sl.cast(sl.int8, 200.7)`` is -56."""
    if isinstance(dtype, ExprOps) and not isinstance(e, ExprOps):
        raise AlgorithmError("sl.cast: the type comes first, then the expression: "
                             "sl.cast(sl.float32, e)")
    dtype = T.as_dtype(dtype)
    e = to_expr(e)
    if isinstance(e, Const) and (e.weak or e.dtype != dtype):
        # a cast literal is typed, even one already of its default type: sl.cast(sl.int32, 1)
        return Const(_convert_value(e.value, dtype), dtype)
    if e.dtype.element() == dtype:
        return e
    return Cast(dtype.with_lanes(e.dtype.lanes), e)


def _convert_value(v, dtype):
    if dtype.is_bool:
        return bool(v)
    if dtype.is_float:
        return T.round_to_float(v, dtype)
    if isinstance(v, float):
        v = float_to_int_bits(v, dtype)
    v = int(v) & ((1 << dtype.bits) - 1)
    if dtype.is_signed and v >= 1 << (dtype.bits - 1):
        v -= 1 << dtype.bits
    return v


def float_conversion_width(dtype: DType) -> int:
    """The width of the signed conversion a float goes through on its way to the integer
    type ``dtype``, as numpy's casts do on x86: 32 bits up to 32-bit types, 64 for 64-bit
    ones; the result then wraps to ``dtype``'s width (``float_to_int_bits``)."""
    return 64 if dtype.bits == 64 else 32


def float_to_int_bits(v: float, dtype: DType) -> int:
    """The float ``v`` converted toward zero to the integer type ``dtype`` as numpy does on
    x86 (SPEC §1: truncate, then narrow ints wrap). A signed conversion of
    ``w = float_conversion_width(dtype)`` bits gives the most negative w-bit value for NaN
    and values outside its range; uint32 / uint64 convert values from 2**(w-1) on as
    ``v - 2**(w-1)`` with the top bit set. Example: ``float_to_int_bits(200.7, int8) == 200``
    (which wraps to -56)."""
    w = float_conversion_width(dtype)
    top = 1 << (w - 1)

    def signed(x):
        return int(x) if not math.isnan(x) and -2.0 ** (w - 1) <= x < 2.0 ** (w - 1) else -top
    if dtype.is_unsigned and dtype.bits == w and v >= 2.0 ** (w - 1):
        return signed(v - 2.0 ** (w - 1)) ^ -top
    return signed(v)


def _as_float_text(v):
    """A Python float literal for int ``v`` in a message: ``float('inf')`` past the doubles."""
    try:
        return repr(float(v))
    except OverflowError:
        return "float('inf')" if v > 0 else "-float('inf')"


def _literal_as(lit: Const, dtype: DType, op: str, what=None) -> Expr:
    """The weak literal ``lit`` next to an operand of type ``dtype`` in ``op``; ``what``
    names where the type comes from for the error (default: the other operand)."""
    if dtype.is_float or (dtype.is_bool and lit.dtype.is_float):
        if not lit.dtype.is_float and dtype.is_float and not _int_fits_float(lit.value, dtype):
            # an int literal is exact, so unlike a float literal it may not round to inf
            shown = lit.value if len(str(lit.value)) <= 80 else \
                f"of {len(str(abs(lit.value)))} digits"
            raise AlgorithmError(f"the int literal {shown} does not fit {dtype} "
                                 f"({_type_source(op, what)}): it would round to inf; use a float "
                                 f"literal ({_as_float_text(lit.value)}) if inf is meant, or "
                                 "sl.cast the operand to a wider type first")
        return Const(lit.value, dtype if dtype.is_float else T.float32)
    if lit.dtype.is_float:  # float literal next to an integer: float32
        return Const(lit.value, T.float32)
    if dtype.is_bool:
        if not T.literal_fits(lit.value, T.int32):
            raise AlgorithmError(f"the literal {lit.value} next to a bool is int32, which it does "
                                 f"not fit, in '{SYMBOL.get(op, op)}'; sl.cast the bool operand "
                                 "to sl.int64 first")
        return Const(lit.value, T.int32)
    if not T.literal_fits(lit.value, dtype):
        # an update stores into a Func whose type its first definition fixed
        fix = (f"store a value that fits, or give {what} a wider type in its first definition "
               "(sl.cast there)" if op == "assignment" else "use sl.cast to widen the operand first")
        raise AlgorithmError(f"the literal {lit.value} does not fit {dtype} "
                             f"({_type_source(op, what)}); {fix}")
    return Const(lit.value, dtype)


def _type_source(op, what):
    """Where a literal's type comes from, for an error message: the other operand's type
    is named by the operator only (an operand may be an internal placeholder)."""
    if what is not None:
        return f"the type of {what}"
    return f"the type of the other operand of '{SYMBOL.get(op, op)}'"


def _int_fits_float(value: int, dtype: DType) -> bool:
    """True when the int ``value`` rounds to a finite value of the float type ``dtype``:
    below 2**(emax + 1) - 2**(emax - mantissa), half an ulp above the largest finite."""
    mantissa, emax = {"float16": (11, 15), "bfloat16": (8, 127), "float32": (24, 127),
                      "float64": (53, 1023)}[dtype.name]
    return abs(value) < (1 << (emax + 1)) - (1 << (emax - mantissa))


def unify(op, a, b):
    """Apply SPEC §1's promotion to two operands; returns both converted to one type."""
    a, b = to_expr(a), to_expr(b)
    wa, wb = is_weak(a), is_weak(b)
    if wa and wb:
        t = T.float32 if (a.dtype.is_float or b.dtype.is_float) else T.int32
        return Const(a.value, t, weak=True), Const(b.value, t, weak=True)
    if wa:
        a = _literal_as(a, b.dtype, op)
        if a.dtype.is_float and not b.dtype.is_float:   # float literal next to an integer
            return a, cast(a.dtype, b)
    elif wb:
        b = _literal_as(b, a.dtype, op)
        if b.dtype.is_float and not a.dtype.is_float:
            return cast(b.dtype, a), b
    ta, tb = a.dtype.element(), b.dtype.element()
    if ta == tb:
        return a, b
    if ta.is_bool and tb.is_bool:
        return a, b
    if ta.is_bool or tb.is_bool:
        t = tb if ta.is_bool else ta
    else:
        try:
            t = T.promote_types(ta, tb)
        except AlgorithmError:
            # suggest converting the integer operand to the float one's type (a mean:
            # sum / K), or the unsigned one to the signed type
            b_first = ta.is_float or (not tb.is_float and tb.is_unsigned)
            to, other = (ta, b) if b_first else (tb, a)
            raise AlgorithmError(
                f"'{SYMBOL.get(op, op)}' of {_shown(a)} ({ta}) and {_shown(b)} ({tb}): no type "
                f"holds both without loss; sl.cast one operand to the type you mean, e.g. "
                f"sl.cast({to}, {_shown(other)})") from None
    return cast(t, a), cast(t, b)


def _shown(e):
    """``e`` as an error message shows it: its algorithm text, cut to 60 characters."""
    text = str(e)
    return text if len(text) <= 60 else text[:57] + "..."


_PY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
       "min": min, "max": max, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
       "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def binary(op, a, b) -> Expr:
    """Build ``a <op> b`` with promotion; ``floordiv``/``mod`` are Python's (numpy's for floats)."""
    a, b = unify(op, a, b)
    if op in ("floordiv", "mod") and a.dtype.is_bool:     # numpy: bool // bool is int8
        a, b = cast(T.int8, a), cast(T.int8, b)
    if op in ("add", "sub", "mul") and a.dtype.is_bool:
        a, b = cast(T.int32, a), cast(T.int32, b)
    if isinstance(a, Const) and isinstance(b, Const) and a.weak and b.weak and op in _PY:
        v = _PY[op](a.value, b.value)
        return Const(v, T.bool_) if op in CMP_OPS else Const(v, a.dtype, weak=True)
    # float // and % stay operators: numpy's result (floor(a / b) is not it: 1.0 // 0.1 is
    # 9.0) is the code generator's to produce
    return BinOp(op, a, b)


def true_div(a, b) -> Expr:
    """``a / b``: true division; integer operands are converted to float32 first (as torch)."""
    a, b = unify("div", a, b)
    if not a.dtype.is_float:
        a, b = cast(T.float32, a), cast(T.float32, b)
    return BinOp("div", a, b)


def bitwise(op, a, b) -> Expr:
    a, b = unify(op, a, b)
    if a.dtype.is_float:
        raise AlgorithmError(f"'{SYMBOL[op]}' needs integer or bool operands, got {a.dtype}; "
                             "use sl.cast to an integer type first")
    if a.dtype.is_bool:
        return BinOp({"bitand": "and", "bitor": "or", "bitxor": "ne"}[op], a, b)
    return BinOp(op, a, b)


def shift(op, a, b) -> Expr:
    """``a << b`` / ``a >> b``: both operands promote as in ``+`` (numpy: uint8 << int64 is
    int64, bool << bool is int8); a literal shift amount must be non-negative."""
    a, b = to_expr(a), to_expr(b)
    sym = SYMBOL[op]
    if a.dtype.is_float or b.dtype.is_float:
        raise AlgorithmError(f"'{sym}' needs integer or bool operands, got {_operand_kind(a)} "
                             f"{sym} {_operand_kind(b)}; use sl.cast to an integer type first")
    if is_weak(b) and b.value < 0:
        # a typed amount is read as unsigned (numpy's); a negative literal is a slip
        raise AlgorithmError(f"'{a} {sym} {b.value}': a shift amount cannot be negative; use "
                             f"{'>>' if op == 'shl' else '<<'} {-b.value} instead")
    if is_weak(a) and is_weak(b):
        a, b = fix_weak(a), fix_weak(b)
    a, b = unify(op, a, b)
    if a.dtype.is_bool:     # numpy shifts bools as int8
        a, b = cast(T.int8, a), cast(T.int8, b)
    return BinOp(op, a, b)


def _operand_kind(e):
    """An operand's type for an error message: ``a float literal`` or ``sl.float32``."""
    if is_weak(e):
        return f"the {'float' if e.dtype.is_float else 'int'} literal {e.value}"
    return repr(e.dtype)


def negate(a) -> Expr:
    a = to_expr(a)
    if isinstance(a, Const):
        return Const(-a.value, a.dtype, a.weak)
    if a.dtype.is_bool:
        a = cast(T.int32, a)
    return UnOp("neg", a)


def invert(a) -> Expr:
    a = to_expr(a)
    if a.dtype.is_float:
        raise AlgorithmError(f"'~' needs an integer or bool operand, got {_shown(a)} "
                             f"({a.dtype}); sl.cast it to an integer type first")
    if is_weak(a):
        a = Const(a.value, T.int32)
    return UnOp("not", a)


def power(a, b) -> Expr:
    """``a ** b`` with the types of ``+``: int ** int is an integer power (wrapping as
    numpy's), anything with a float a float pow. A literal exponent 1..16 multiplies out."""
    a, b = to_expr(a), to_expr(b)
    if is_weak(b) and not b.dtype.is_float and not is_weak(a) and 1 <= b.value <= 16:
        if a.dtype.is_bool:
            a = cast(T.int32, a)
        # float16 / bfloat16: multiply in float32 and round once, as numpy's and torch's
        # pow do; rounding each product to 16 bits would be off by several ulps (x ** 16)
        low = a.dtype.is_float and a.dtype.bits == 16
        base = cast(T.float32, a) if low else a
        out = base
        for _ in range(b.value - 1):
            out = BinOp("mul", out, base)
        return cast(a.dtype, out) if low else out
    # an exponent of 0 stays a pow: folding it to 1 would drop the base's reads, and with
    # them Inputs and Params from the kernel's arguments
    return call_math("pow", a, b)


def _int_power(a, b) -> Expr:
    """``a ** b`` for integer / bool operands: numpy's promotion, an integer result."""
    if is_weak(a) and is_weak(b):
        if b.value < 0:
            raise AlgorithmError(f"{a.value} ** {b.value}: an integer to a negative integer "
                                 f"power is not an integer; write {_as_float_text(a.value)} ** {b.value}")
        if abs(a.value) >= 2 and b.value >= 64:     # beyond int64: not worth computing
            raise AlgorithmError(f"{a.value} ** {b.value} does not fit any integer type; write "
                                 f"{_as_float_text(a.value)} ** {b.value} for a float")
        return Const(a.value ** b.value, T.int32, weak=True)
    if isinstance(b, Const) and b.value < 0:
        # numpy: "Integers to negative integer powers are not allowed"
        raise AlgorithmError(f"{a} ** {b.value}: an integer to a negative integer power is not "
                             f"an integer (numpy refuses it too); cast the base to a float type "
                             f"first, e.g. sl.cast(sl.float32, {a}) ** {b.value}")
    a, b = unify("pow", a, b)
    if a.dtype.is_bool:         # numpy: bool ** bool is int8
        a, b = cast(T.int8, a), cast(T.int8, b)
    return Call("pow", [a, b], a.dtype)


def call_math(name, *args) -> Expr:
    """Apply a math function; integer arguments are converted to float32 (abs, floor and
    ceil keep ints, and pow of two integers is an integer power)."""
    args = [to_expr(a) for a in args]
    if name == "abs":
        a = args[0]
        if is_weak(a):
            return Const(abs(a.value), a.dtype, weak=True)
        if a.dtype.is_bool:
            raise AlgorithmError(f"sl.abs needs a number, got the bool expression {_shown(a)}; "
                                 "sl.cast it to a number type first")
        return Call("abs", [a], a.dtype)
    if name == "pow":
        if not (args[0].dtype.is_float or args[1].dtype.is_float):
            return _int_power(*args)
        a, b = unify("pow", *args)
        if not a.dtype.is_float:
            a, b = cast(T.float32, a), cast(T.float32, b)
        return Call("pow", [a, b], a.dtype)
    (a,) = args
    if name in ("floor", "ceil") and not is_weak(a) and a.dtype.is_int:
        return a        # already whole: the integer itself, as numpy and torch give
    if is_weak(a):
        a = Const(a.value, T.float32)
    if not a.dtype.is_float:
        a = cast(T.float32, a)
    return Call(name, [a], a.dtype)


def select(cond, t, f) -> Expr:
    """``sl.select(c, a, b)``: ``a`` where the bool ``c`` holds, else ``b``."""
    cond = to_expr(cond)
    if not cond.dtype.is_bool:
        raise AlgorithmError(f"sl.select needs a bool condition, got {cond} of type {cond.dtype}; "
                             "compare it (e.g. x != 0)")
    t, f = unify("select", t, f)
    if is_weak(t) and is_weak(f):
        # two literals alone: int32 / float32, and one that does not fit is an error
        t, f = fix_weak(t), fix_weak(f)
    return Select(cond, t, f)


def minimum2(a, b) -> Expr:
    """``sl.min(a, b)``: the smaller operand; for floats a NaN in either operand is the
    result, as numpy's ``minimum``. Example: ``sl.min(A[i], 0.0)``."""
    return binary("min", a, b)


def maximum2(a, b) -> Expr:
    """``sl.max(a, b)``: the larger operand; for floats a NaN in either operand is the
    result, as numpy's ``maximum`` (so ``sl.maximum`` reductions keep a NaN they read).
    Example: ``sl.max(A[i], 0.0)``."""
    return binary("max", a, b)


def clamp(x, lo, hi) -> Expr:
    """``sl.clamp(x, lo, hi)`` = ``min(max(x, lo), hi)``."""
    x = to_expr(x)
    if not is_weak(x):      # a bound that does not fit is named as sl.clamp's, not 'min''s
        for bound in (lo, hi):
            bound = to_expr(bound)
            if is_weak(bound):
                _literal_as(bound, x.dtype, "clamp", f"the value {_shown(x)} in sl.clamp")
    # typed operands with no common type are named as sl.clamp's, not 'max''s / 'min''s
    typed = [e for e in (x, to_expr(lo), to_expr(hi)) if not is_weak(e)]
    for n, a in enumerate(typed):
        for b in typed[n + 1:]:
            unify("clamp", a, b)
    return binary("min", binary("max", x, lo), hi)


def fix_weak(e: Expr) -> Expr:
    """A weak literal standing alone becomes int32 / float32 (SPEC §1); an int literal that
    does not fit int32 is an error rather than a wrapped value."""
    if is_weak(e):
        if e.dtype.is_int and not T.literal_fits(e.value, e.dtype):
            raise AlgorithmError(f"the literal {e.value} stands alone, so it is {e.dtype}, which it "
                                 "does not fit; write it with a type, e.g. "
                                 f"sl.cast(sl.int64, {e.value}) or {_as_float_text(e.value)}")
        return Const(e.value, e.dtype)
    return e


# the walkers over these nodes (rebuild, substitute, cached keys and summaries); they live in
# their own module and are re-exported here, where the rest of the compiler finds them as E.*
from .expr_walk import (FUNC_READ, INT_MINMAX, _var_names, expr_vars, map_expr,  # noqa: E402,F401
                        node_flags, same, structural_key, substitute, walk_expr)
