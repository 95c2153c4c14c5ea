"""Hardware tensor instructions, declared by their semantics, for ``tensorize``.

Each ``Intrinsic`` is data: its shape (``lanes`` results, each the dot product of ``depth``
pairs), its operand dtypes, the CPU features it needs, the LLVM intrinsic that emits it,
and its semantics as an ordinary schedlang algorithm (``semantics()``: a Func with a pure
definition ``out[j] = acc[j]`` and one update ``out[j] = out[j] + cast(a[j, r]) *
cast(b[j, r])`` over ``r`` in ``[0, depth)``). The same description drives three things:
``tensorize`` checks that the loop nest it replaces computes exactly that update, the LLVM
backend emits the instruction, and tests run the semantics Func as a reference.

Example::

    import schedlang as sl
    from schedlang.intrinsics import vpdpbusd
    s[acc].tensorize("j.i", vpdpbusd)   # 16 int32 lanes += 4 uint8 x int8 products each
"""
from __future__ import annotations

from .algo import types as T
from .algo.expr import Var, cast
from .algo.func import Func, Input, RDom


class Intrinsic:
    """One dot-product instruction: ``out[j] = acc[j] + sum_r acc_type(a[j, r]) *
    acc_type(b[j, r])`` for ``j < lanes``, ``r < depth``.

    ``features`` are the LLVM CPU features it needs (``"avx512vnni"``); ``llvm_name`` the
    LLVM intrinsic; ``llvm_operand`` the LLVM element type and count its ``a`` / ``b``
    registers are passed as. Example: ``vpdpbusd.semantics()`` is the Func that defines it.
    """

    def __init__(self, name, lanes, depth, acc_dtype, a_dtype, b_dtype, features, llvm_name,
                 llvm_operand, doc):
        self.name, self.lanes, self.depth = name, lanes, depth
        self.acc_dtype, self.a_dtype, self.b_dtype = acc_dtype, a_dtype, b_dtype
        self.features, self.llvm_name, self.llvm_operand = tuple(features), llvm_name, llvm_operand
        self.__doc__ = doc

    def __repr__(self):
        return (f"<intrinsic {self.name}: {self.lanes} x {self.acc_dtype.name} += {self.depth} x "
                f"{self.a_dtype.name} * {self.b_dtype.name} ({', '.join(self.features)})>")

    def shape_text(self):
        """``16 lanes x 4 reduction steps``: what a matching loop nest must look like."""
        return f"{self.lanes} lanes x {self.depth} reduction steps"

    def semantics(self):
        """The instruction as an algorithm: a Func ``out`` over Inputs ``acc`` (lanes),
        ``a`` and ``b`` (lanes x depth). Compile it like any Func to get a reference
        implementation. Example: ``sl.compile(vpdpbusd.semantics())(acc=c, a=x, b=y)``."""
        acc = Input("acc", self.acc_dtype, (self.lanes,))
        a = Input("a", self.a_dtype, (self.lanes, self.depth))
        b = Input("b", self.b_dtype, (self.lanes, self.depth))
        j = Var("j")
        r = RDom(self.depth, name="r")
        out = Func(self.name, shape=(self.lanes,))
        out[j] = acc[j]
        out[j] = out[j] + cast(self.acc_dtype, a[j, r]) * cast(self.acc_dtype, b[j, r])
        return out


vpdpbusd = Intrinsic(
    "vpdpbusd", 16, 4, T.int32, T.uint8, T.int8, ("avx512vnni",),
    "llvm.x86.avx512.vpdpbusd.512", ("i32", 16),
    "AVX-512 VNNI: 16 int32 lanes, each += the sum of 4 products uint8 x int8 (wrapping).")

vdpbf16ps = Intrinsic(
    "vdpbf16ps", 16, 2, T.float32, T.bfloat16, T.bfloat16, ("avx512bf16",),
    "llvm.x86.avx512bf16.dpbf16ps.512", ("bfloat", 32),
    "AVX-512 BF16: 16 float32 lanes, each += the sum of 2 products bfloat16 x bfloat16 "
    "(the hardware flushes denormals and rounds once per pair, so results agree with the "
    "loop nest within bfloat16 tolerance, not bit for bit).")

INTRINSICS = {i.name: i for i in (vpdpbusd, vdpbf16ps)}


def lookup(x):
    """The Intrinsic ``x`` names (an Intrinsic or its name), or None."""
    if isinstance(x, Intrinsic):
        return x
    return INTRINSICS.get(x) if isinstance(x, str) else None
