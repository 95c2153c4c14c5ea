"""Elementwise math functions of the algorithm language (``sl.exp``, ``sl.pow``, ...).

Integer arguments are converted to float32 first (``sl.abs`` keeps integers).
Example: ``sl.exp(A[i] - m[0])``.
"""
from __future__ import annotations

from .expr import call_math


def abs(x):  # noqa: A001
    """Absolute value (integers stay integers)."""
    return call_math("abs", x)


def exp(x):
    """e**x."""
    return call_math("exp", x)


def log(x):
    """Natural logarithm."""
    return call_math("log", x)


def sqrt(x):
    """Square root."""
    return call_math("sqrt", x)


def rsqrt(x):
    """1 / sqrt(x)."""
    return call_math("rsqrt", x)


def sin(x):
    """Sine (radians)."""
    return call_math("sin", x)


def cos(x):
    """Cosine (radians)."""
    return call_math("cos", x)


def tanh(x):
    """Hyperbolic tangent."""
    return call_math("tanh", x)


def pow(x, y):  # noqa: A001
    """x ** y: an integer power when both are integers (as numpy), else floating point."""
    return call_math("pow", x, y)


def floor(x):
    """Round toward -inf (float result)."""
    return call_math("floor", x)


def ceil(x):
    """Round toward +inf (float result)."""
    return call_math("ceil", x)


def erf(x):
    """The error function."""
    return call_math("erf", x)
