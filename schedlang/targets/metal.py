"""The Metal target: the C-style renderer's table for the Metal Shading Language (Apple
GPUs). Metal has no 64-bit floats: a float64 pipeline is refused with a CompileError.
Math uses ``metal::precise`` (the default fast math is not within a few ulp); ``erf``,
which Metal lacks, is a rational approximation (relative error below 1.2e-7).
Example: ``sl.compile(C, s, target="metal").source``.
"""
from __future__ import annotations

from .cstyle import Language

_PRECISE = ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil", "pow",
            "fmod")
MATH = {(n, 32): f"precise::{n}" for n in _PRECISE}
MATH.update({("abs", 32): "precise::fabs", ("erf", 32): "sl_erf"})

_ERF = r"""
SL_FN float sl_erf(float x) {
  float z = precise::fabs(x), t = 1.0f / (1.0f + 0.5f * z);
  float r = t * precise::exp(-z * z - 1.26551223f + t * (1.00002368f + t * (0.37409196f
      + t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f
      + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));
  return x >= 0.0f ? 1.0f - r : r - 1.0f;
}
"""

METAL = Language(
    "metal",
    prelude=("#include <metal_stdlib>\nusing namespace metal;\n"
             "#define SL_FN static inline\n"
             "#define F2U(f) as_type<uint>(f)\n#define U2F(u) as_type<float>((uint)(u))\n"
             "typedef ulong sl_u64;\nCOMMON_PRELUDE" + _ERF),
    kernel_prefix="kernel ",
    buffer_param="device {const}{type}* {name} [[buffer({index})]]",
    scalar_param="constant {type}& {name} [[buffer({index})]]",
    block_idx={d: f"sl_group.{d}" for d in "xyz"},
    thread_idx={d: f"sl_thread.{d}" for d in "xyz"},
    barrier="threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);",
    shared="threadgroup",
    types={"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
           "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
           "float32": "float"},
    bits_float={32: "as_type<float>((uint){})"},
    math=MATH,
    extra_params=("uint3 sl_group [[threadgroup_position_in_grid]]",
                  "uint3 sl_thread [[thread_position_in_threadgroup]]"),
    has_float64=False,
    restrict="",
    int64_suffix=("l", "ul"),
)
