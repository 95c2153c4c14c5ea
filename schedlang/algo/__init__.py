"""The algorithm language: what is computed (SPEC §1)."""
from .types import (DType, bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,  # noqa: F401
                    float16, bfloat16, float32, float64)
from .expr import Expr, Var, RVar, Param, cast, select, clamp  # noqa: F401
from .func import Func, Input, RDom, vars  # noqa: F401
from .boundary import clamp_edge, wrap, mirror, constant_exterior  # noqa: F401
