"""schedlang: Halide-style algorithm / schedule separation in Python.

Write *what* is computed once (Funcs over Vars and RDoms), say *how* in a separate
Schedule (split, reorder, vectorize, parallel, compute_at, ...), and compile it for the
CPU through LLVM. Example::

    import schedlang as sl
    x = sl.Var("x"); A = sl.Input("A", sl.float32, ("N",))
    f = sl.Func("f", shape=(A.shape[0],)); f[x] = A[x] * 2
    s = sl.Schedule(f); s[f].vectorize(x, 8)
    out = sl.compile(f, s)(A=np.arange(16, dtype=np.float32))
"""
from .errors import (SchedlangError, AlgorithmError, ScheduleError, CompileError,  # noqa: F401
                     ArgumentError, OutOfMemoryError)
from .algo.types import (DType, int8, int16, int32, int64, uint8, uint16, uint32, uint64,  # noqa: F401
                         float16, bfloat16, float32, float64)
from .algo.types import bool_ as bool  # noqa: F401,A001 - SPEC name sl.bool
from .algo.expr import Expr, Var, RVar, Param, cast, select, clamp  # noqa: F401
from .algo.expr import minimum2 as min, maximum2 as max  # noqa: F401,A001
from .algo.func import (Func, Input, RDom, vars, assume, sum, product, maximum, minimum,  # noqa: F401,A001
                        argmax, argmin)
from .algo.boundary import clamp_edge, wrap, mirror, constant_exterior  # noqa: F401
from .algo.math import (abs, exp, log, sqrt, rsqrt, sin, cos, tanh, pow, floor, ceil,  # noqa: F401,A001
                        erf)
from .schedule.schedule import Schedule  # noqa: F401
from .compiler import compile, lower  # noqa: F401,A001
from .autotune import autotune  # noqa: F401
from . import intrinsics  # noqa: F401,E402 - sl.intrinsics.vpdpbusd etc.

__version__ = "0.1.0"
