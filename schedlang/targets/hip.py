"""The HIP target: the C-style renderer's table for HIP (AMD GPUs). The source needs no
HIP headers: thread indices, barriers and math are clang builtins and ROCm's device
library (OCML) functions, so it compiles with hiprtc or with a plain
``clang -x hip -nogpuinc``. Example: ``sl.compile(C, s, target="hip:gfx942").source``.
"""
from __future__ import annotations

from .cuda import C_TYPES
from .cstyle import Language

_OCML = ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil", "erf", "pow",
         "fmod", "fabs")
MATH = {}
for _n in _OCML:
    for _w in (32, 64):
        MATH[(_n, _w)] = f"__ocml_{_n}_f{_w}"
MATH[("abs", 32)], MATH[("abs", 64)] = MATH[("fabs", 32)], MATH[("fabs", 64)]

_ARITY = {"pow": 2, "fmod": 2}
_DECLS = "".join(
    f'extern "C" __attribute__((device, const)) {t} __ocml_{n}_f{w}'
    f'({", ".join([t] * _ARITY.get(n, 1))});\n'
    for n in _OCML for w, t in ((32, "float"), (64, "double")))

_BARRIER = ('__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); '
            '__builtin_amdgcn_s_barrier(); '
            '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");')

HIP = Language(
    "hip",
    prelude=("#define SL_FN static __attribute__((device)) inline\n"
             "#define F2U(f) __builtin_bit_cast(unsigned int, f)\n"
             "#define U2F(u) __builtin_bit_cast(float, (unsigned int)(u))\n"
             "typedef unsigned long long sl_u64;\n" + _DECLS + "COMMON_PRELUDE"),
    kernel_prefix='extern "C" __attribute__((global)) ',
    launch_bounds="__attribute__((amdgpu_flat_work_group_size(1, {}))) ",
    buffer_param="{const}{type}* {restrict} {name}",
    scalar_param="{type} {name}",
    block_idx={d: f"__builtin_amdgcn_workgroup_id_{d}()" for d in "xyz"},
    thread_idx={d: f"__builtin_amdgcn_workitem_id_{d}()" for d in "xyz"},
    barrier=_BARRIER,
    shared="__attribute__((shared))",
    types=C_TYPES,
    float_bits={32: "__builtin_bit_cast(unsigned int, {})",
                64: "__builtin_bit_cast(unsigned long long, {})"},
    bits_float={32: "__builtin_bit_cast(float, (unsigned int){})",
                64: "__builtin_bit_cast(double, (unsigned long long){})"},
    math=MATH,
)
