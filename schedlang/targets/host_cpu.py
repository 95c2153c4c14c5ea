"""What the default schedules size their vectors and register tiles by: the vector
registers of this machine's CPU, read from LLVM's host feature string. AVX-512 has 32
registers of 64 bytes, AVX / AVX2 16 of 32 bytes, anything else (SSE, NEON) 16 of 16.
A tile written for 32 registers spills on a machine with 16 (a 6 x 4-register GEMM tile
ran at a third of numpy's speed on AVX2), so schedules ask here rather than assume.
Example: ``vector_lanes(4)`` is 16 on an AVX-512 machine and 8 on an AVX2 one.
"""
from __future__ import annotations

import functools

from .llvm_jit import _resolve_target


def host_features() -> str:
    """The host CPU's LLVM feature string (``+avx512f,...``).
    Example: ``"+avx512f" in host_features()``."""
    return _resolve_target("llvm")[1]


@functools.lru_cache(maxsize=None)
def target_features(target="llvm") -> str:
    """The features that size vectors and register tiles for ``target``: the host's for
    ``llvm``; for ``llvm:<cpu>`` (whose kernels are built for that CPU, not this one) the
    marker of its widest vector register, asked of LLVM by compiling a 16-float add.
    Example: ``vector_lanes(4, target_features("llvm:haswell"))`` is 8."""
    if target == "llvm":
        return host_features()
    from .llvm_jit import _LLVM_LOCK, _init_llvm, _target_machine, llvm
    cpu, feats = _resolve_target(target)
    probe = ("define <16 x float> @probe(<16 x float> %a, <16 x float> %b) {\n"
             "  %r = fadd <16 x float> %a, %b\n  ret <16 x float> %r\n}\n")
    with _LLVM_LOCK:
        _init_llvm()
        asm = _target_machine(cpu, feats).emit_assembly(llvm.parse_assembly(probe))
    return "+avx512f,+avx" if "zmm" in asm else ("+avx" if "ymm" in asm else "")


def vector_bytes(features=None) -> int:
    """Bytes in one vector register: 64 with AVX-512, 32 with AVX, else 16.
    Example: ``vector_bytes("+avx,+avx2")`` is 32."""
    feats = host_features() if features is None else features
    return 64 if "+avx512f" in feats else (32 if "+avx" in feats else 16)


def vector_lanes(dtype_bytes=4, features=None) -> int:
    """Elements of ``dtype_bytes`` bytes in one vector register.
    Example: ``vector_lanes(8, "+avx,+avx2")`` is 4 (float64 in a ymm register)."""
    return max(1, vector_bytes(features) // max(1, dtype_bytes))


def vector_registers(features=None) -> int:
    """Architectural vector registers: 32 with AVX-512, else 16.
    Example: ``vector_registers("+avx512f")`` is 32."""
    feats = host_features() if features is None else features
    return 32 if "+avx512f" in feats else 16


@functools.lru_cache(maxsize=None)
def l2_cache_bytes() -> int:
    """Bytes of the level-2 cache of one core (Linux sysfs), or 1 MiB where it cannot be
    read. Packed GEMM panels take half of it, so the other half holds what streams by.
    Example: ``l2_cache_bytes()`` is 524288 on a Zen 3 core."""
    import glob
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(f"{index}/level") as fh:
                level = fh.read().strip()
            with open(f"{index}/size") as fh:
                size = fh.read().strip().upper()
        except OSError:
            continue
        if level == "2" and size[:-1].isdigit() and size[-1] in "KM":
            return int(size[:-1]) << (10 if size[-1] == "K" else 20)
    return 1 << 20


__all__ = ["host_features", "target_features", "vector_bytes", "vector_lanes",
           "vector_registers", "l2_cache_bytes"]
