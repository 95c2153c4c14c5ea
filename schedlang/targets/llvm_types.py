"""LLVM IR types for schedlang dtypes, shared by the LLVM backend's modules.

``reg_type(dt)`` is the LLVM type of a (possibly vector) value of ``dt`` in registers,
``mem_type(dt)`` the type of one element in memory, and ``mem_type_bytes(dt)`` its size in
bytes. ``I1`` .. ``F64`` and ``PTR`` are the IR types the code generator uses. Example::

    reg_type(T.float32.with_lanes(8))   # <8 x float>
    mem_type(T.bool_)                   # i8 (a bool takes one byte in memory)
    _mangle(reg_type(T.float32.with_lanes(8)))  # "v8f32", for intrinsic names
"""
from __future__ import annotations

from llvmlite import ir

from ..algo import expr as E
from ..algo.types import DType
from ..lower import ir as L

# ============================================================================== types

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()


class BFloatType(ir.Type):
    """LLVM's ``bfloat``, which llvmlite's IR builder lacks: the operand element type of
    AVX512-BF16 intrinsics such as ``llvm.x86.avx512bf16.dpbf16ps.512``."""

    null = "0.0"
    intrinsic_name = "bf16"

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, BFloatType)

    def __hash__(self):
        return hash(BFloatType)


def intrinsic_operand_type(elem: str, count: int):
    """The vector type an intrinsic declares for its operands, from ``Intrinsic.llvm_operand``
    (``("bfloat", 32)`` -> ``<32 x bfloat>``, ``("i32", 16)`` -> ``<16 x i32>``)."""
    scalar = BFloatType() if elem == "bfloat" else ir.IntType(int(elem[1:]))
    return ir.VectorType(scalar, count)


def _element_type(dt: DType):
    """The LLVM scalar type of a value of ``dt`` in registers (bool is i1, bfloat16 i16)."""
    if dt.is_bool:
        return I1
    if dt.is_int:
        return ir.IntType(dt.bits)
    return {"float16": F16, "bfloat16": I16, "float32": F32, "float64": F64}[dt.name]


def reg_type(dt: DType):
    """The LLVM type of a (possibly vector) value of ``dt`` in registers."""
    elem = _element_type(dt)
    return ir.VectorType(elem, dt.lanes) if dt.lanes > 1 else elem


def mem_type(dt: DType):
    """The LLVM type of one element of ``dt`` in memory (bool takes one byte)."""
    return I8 if dt.is_bool else _element_type(dt)


def _mangle(ty) -> str:
    """The overload suffix of an LLVM intrinsic for ``ty`` (``f32``, ``v16f32``, ``i64``)."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_mangle(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(ty)]


def _const_int(e):
    """The Python int of a constant integer expression (scalar or broadcast), else None."""
    if isinstance(e, L.Broadcast):
        e = e.value
    if isinstance(e, E.Const) and not e.dtype.is_float:
        return int(e.value)
    return None


def _is_f32_or_f64(dt: DType) -> bool:
    return dt.name in ("float32", "float64")


def mem_type_bytes(dt: DType) -> int:
    """Bytes of one element of ``dt`` in memory (the natural alignment of its accesses)."""
    return 1 if dt.is_bool else max(1, dt.bits // 8)
