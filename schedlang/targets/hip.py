"""The HIP target: the C-style renderer's table for HIP (AMD GPUs). HIP spells kernels,
thread indices, barriers and math as CUDA does, so the table is CUDA's with HIP's runtime
header; hiprtc compiles it on a machine with ROCm.
Example: ``sl.compile(C, s, target="hip:gfx942").source``.
"""
from __future__ import annotations

from .cstyle import Language
from .cuda import CUDA

HIP = Language(
    "hip",
    **{**CUDA.fields(),
       "prelude": "#include <hip/hip_runtime.h>\n" + CUDA.prelude},
)
