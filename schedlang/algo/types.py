"""Scalar and vector element types, and the promotion rules of SPEC §1.

Python literals are *weak* (NEP 50): an int literal takes the type of the other
operand, a float literal takes the other operand's float type (float32 next to an
integer). Typed operands widen losslessly; a lossy mix needs ``sl.cast``.
Example: ``promote_types(uint8, int32) is int32``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import AlgorithmError


class DType:
    """An element type, optionally with vector lanes (lanes > 1 only inside loop IR)."""

    __slots__ = ("name", "kind", "bits", "lanes")

    def __init__(self, name: str, kind: str, bits: int, lanes: int = 1):
        self.name, self.kind, self.bits, self.lanes = name, kind, bits, lanes

    def with_lanes(self, lanes: int) -> "DType":
        return self if lanes == self.lanes else DType(self.name, self.kind, self.bits, lanes)

    def element(self) -> "DType":
        return self.with_lanes(1)

    @property
    def is_float(self):
        return self.kind == "f"

    @property
    def is_int(self):
        return self.kind in ("i", "u")

    @property
    def is_signed(self):
        return self.kind == "i"

    @property
    def is_unsigned(self):
        return self.kind == "u"

    @property
    def is_index(self):
        """A signed integer of 32 or 64 bits: arithmetic in it is index math, which lowering
        assumes does not overflow (as Halide does); unsigned and 8/16-bit arithmetic wraps."""
        return self.kind == "i" and self.bits >= 32

    @property
    def is_bool(self):
        return self.kind == "b"

    @property
    def bytes(self):
        return max(1, self.bits // 8)

    @property
    def numpy(self):
        """The numpy dtype arrays of this type use (bfloat16 is carried as uint16 bits)."""
        return _NUMPY_DTYPE[self.name]

    def min_value(self):
        if self.kind == "u" or self.kind == "b":
            return 0
        if self.kind == "i":
            return -(1 << (self.bits - 1))
        return -float("inf")

    def max_value(self):
        if self.kind == "b":
            return 1
        if self.kind == "u":
            return (1 << self.bits) - 1
        if self.kind == "i":
            return (1 << (self.bits - 1)) - 1
        return float("inf")

    def __eq__(self, other):
        return isinstance(other, DType) and self.name == other.name and self.lanes == other.lanes

    def __hash__(self):
        return hash((self.name, self.lanes))

    def __repr__(self):
        base = "sl." + ("bool" if self.name == "bool" else self.name)
        return base if self.lanes == 1 else f"{base}x{self.lanes}"


bool_ = DType("bool", "b", 1)
int8, int16, int32, int64 = (DType(f"int{b}", "i", b) for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (DType(f"uint{b}", "u", b) for b in (8, 16, 32, 64))
float16 = DType("float16", "f", 16)
bfloat16 = DType("bfloat16", "f", 16)
float32 = DType("float32", "f", 32)
float64 = DType("float64", "f", 64)

ALL_TYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
             float16, bfloat16, float32, float64)
BY_NAME = {t.name: t for t in ALL_TYPES}
_NUMPY_NAME = {t.name: t.name for t in ALL_TYPES}
_NUMPY_NAME["bfloat16"] = "uint16"
_NUMPY_NAME["bool"] = "bool"
# built once: a kernel call asks for its arguments' dtypes every time
_NUMPY_DTYPE = {name: np.dtype(numpy_name) for name, numpy_name in _NUMPY_NAME.items()}


def from_numpy(dt) -> DType:
    """The schedlang type of a numpy dtype (``np.float32`` -> ``sl.float32``)."""
    name = np.dtype(dt).name
    if name not in BY_NAME:
        raise AlgorithmError(f"numpy dtype {name} has no schedlang type; use one of "
                             + ", ".join(t.name for t in ALL_TYPES))
    return BY_NAME[name]


def as_dtype(x) -> DType:
    """Accept a DType, a numpy dtype, a torch dtype or a type name."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in BY_NAME:
        return BY_NAME[x]
    if x is None:   # numpy reads None as float64; a missing type is a mistake here
        raise AlgorithmError("None is not a schedlang type; use sl.float32, sl.int32, ...")
    if type(x).__module__ == "torch" and str(x).removeprefix("torch.") in BY_NAME:
        # torch's dtypes (torch.float32, torch.bfloat16), by name: torch is not imported
        return BY_NAME[str(x).removeprefix("torch.")]
    try:
        return from_numpy(x)
    except (TypeError, ValueError):
        raise AlgorithmError(f"{x!r} is not a schedlang type; use sl.float32, sl.int32, ...") from None


def can_represent(big: DType, small: DType) -> bool:
    """True when every value of ``small`` converts to ``big`` without loss."""
    big, small = big.element(), small.element()
    if big == small or small.is_bool:
        return True
    if big.is_bool:
        return False
    if big.is_float:
        if small.is_float:
            if small.name == "bfloat16":
                return big.bits >= 32
            if small.name == "float16":
                return big.name != "bfloat16"
            return big.bits >= small.bits
        mant = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[big.name]
        return small.bits - (1 if small.is_signed else 0) <= mant
    if small.is_float:
        return False
    if big.is_signed:
        return small.bits < big.bits or (small.is_signed and small.bits <= big.bits)
    return small.is_unsigned and small.bits <= big.bits


def promote_types(a: DType, b: DType) -> DType:
    """The smallest type both typed operands widen to losslessly (numpy's rule).

    Example: ``promote_types(int8, uint8) is int16``; a mix with no such type raises.
    """
    a, b = a.element(), b.element()
    if can_represent(a, b):
        return a
    if can_represent(b, a):
        return b
    for cand in (int16, int32, int64, float32, float64):
        if can_represent(cand, a) and can_represent(cand, b):
            return cand
    raise AlgorithmError(f"no type holds both {a} and {b} without loss; add sl.cast(...) "
                         f"to choose one")


# significand bits (with the leading one), smallest normal exponent, largest exponent
FLOAT_FORMATS = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127),
                 "float32": (24, -126, 127), "float64": (53, -1022, 1023)}


def round_to_float(value, dtype: DType) -> float:
    """``value`` (a Python int or float) rounded once, to nearest with ties to even, to
    the float type ``dtype``, as a Python float; beyond the largest finite it is infinite.
    Rounding through float64 or float32 first could round twice (an int above 2**53, or
    a float64 between two bfloat16 values). Example: ``round_to_float(2**24 + 2**16 + 1,
    bfloat16) == 2**24 + 2**17``."""
    if isinstance(value, float) and (value != value or value in (float("inf"), -float("inf"))):
        return value
    if dtype.name == "float64":
        try:
            return float(value)     # Python rounds an int to a double once
        except OverflowError:       # an int beyond the largest double
            return math.inf if value > 0 else -math.inf
    if isinstance(value, float) and dtype.name != "bfloat16":
        return float(np.float64(value).astype(dtype.numpy))   # numpy rounds a double once
    bits, emin, emax = FLOAT_FORMATS[dtype.name]
    x = Fraction(value)
    # -0.0 is not < 0 as a Fraction: take a float's sign from its bit
    sign = math.copysign(1.0, value) if isinstance(value, float) else -1.0 if x < 0 else 1.0
    x = abs(x)
    if x == 0:
        return sign * 0.0
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - (bits - 1))   # subnormals share the smallest
    n, rest = divmod(x / quantum, 1)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    rounded = n * quantum
    if rounded >= Fraction(2) ** (emax + 1):
        return sign * float("inf")
    return sign * float(rounded)


def literal_fits(value, dtype: DType) -> bool:
    if dtype.is_bool:
        return value in (0, 1, True, False)
    return dtype.min_value() <= value <= dtype.max_value()


# the largest extent of one dimension or loop: loop variables are int32 (SPEC §1)
MAX_EXTENT = 2 ** 31 - 1
