"""The CUDA target: the C-style renderer's table for CUDA C (compiled with NVRTC or nvcc,
run through the CUDA driver API). Example: ``sl.compile(C, s, target="cuda:sm_90").source``.
"""
from __future__ import annotations

from .cstyle import Language

_MATH_NAMES = ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil", "erf",
               "pow", "fmod")
MATH = {(n, 32): n + "f" for n in _MATH_NAMES}
MATH.update({(n, 64): n for n in _MATH_NAMES})
MATH.update({("abs", 32): "fabsf", ("abs", 64): "fabs"})

C_TYPES = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
           "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
           "uint32": "unsigned int", "uint64": "unsigned long long", "float32": "float",
           "float64": "double"}

CUDA = Language(
    "cuda",
    prelude=("#define SL_FN static __device__ __forceinline__\n"
             "#define F2U(f) __float_as_uint(f)\n#define U2F(u) __uint_as_float(u)\n"
             "typedef unsigned long long sl_u64;\nCOMMON_PRELUDE"),
    kernel_prefix='extern "C" __global__ ',
    launch_bounds="__launch_bounds__({}) ",
    buffer_param="{const}{type}* {restrict} {name}",
    scalar_param="{type} {name}",
    block_idx={"x": "blockIdx.x", "y": "blockIdx.y", "z": "blockIdx.z"},
    thread_idx={"x": "threadIdx.x", "y": "threadIdx.y", "z": "threadIdx.z"},
    barrier="__syncthreads();",
    shared="__shared__",
    types=C_TYPES,
    bits_float={32: "__uint_as_float({})", 64: "__longlong_as_double((long long){})"},
    math=MATH,
)
