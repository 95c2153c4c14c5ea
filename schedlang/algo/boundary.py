"""Boundary conditions named after numpy.pad's modes (SPEC §1).

Each returns a view that may be read at any index; the index is mapped into the
source's extent, so bounds inference can prove every read of the source in bounds.
Example: ``Ac = sl.clamp_edge(A); blur[i] = Ac[i - 1] + Ac[i] + Ac[i + 1]``.
"""
from __future__ import annotations

from ..errors import AlgorithmError
from . import expr as E
from . import types as T
from .func import index_exprs


class BoundaryView:
    """A Func-like view of ``source`` extended beyond its extent by ``mode``."""

    def __init__(self, source, mode, value=None):
        _check_source(source, mode)
        shape = getattr(source, "shape", None)
        if shape is None:
            raise AlgorithmError(f"sl.{_API[mode]}({source.name}): the source needs a known shape; "
                                 f"give Func {source.name} shape=(...)")
        self.source, self.mode, self.shape = source, mode, shape
        self.name = source.name
        self.value = None
        if mode == "constant":
            v = E.to_expr(value)
            if E.is_weak(v):
                # checked as a literal next to the source (an int that does not fit is an
                # error), then kept weak: the read and the value meet as in sl.select, so a
                # float literal around an int32 image gives float32, as A[x] + 0.5 does
                try:
                    E._literal_as(v, source.dtype, "constant_exterior", source.name)
                except AlgorithmError:
                    if source.dtype.is_float:   # its advice (a float literal for inf) holds
                        raise
                    # an Input cannot be cast: say how to pad with a wider value
                    raise AlgorithmError(
                        f"sl.constant_exterior({source.name}, {v.value}): the value {v.value} "
                        f"does not fit {source.name}'s type {source.dtype}; pass a value that "
                        f"fits, or pad a Func that widens {source.name} (g[...] = "
                        f"sl.cast(<wider type>, {source.name}[...]) with a shape=)") from None
                self.value = v
            else:
                self.value = E.cast(source.dtype, v) if T.can_represent(
                    source.dtype, v.dtype) else _lossy(source, v)

    def __repr__(self):
        # as the user wrote it (errors show it): sl.clamp_edge(A), sl.constant_exterior(A, 0)
        value = "" if self.mode != "constant" else f", {self.value}"
        src = repr(self.source) if isinstance(self.source, BoundaryView) else self.name
        return f"sl.{_API[self.mode]}({src}{value})"

    @property
    def dtype(self):
        if self.mode != "constant":
            return self.source.dtype
        return E.select(E.Const(True, T.bool_), E.Var("_", self.source.dtype), self.value).dtype

    def __getitem__(self, args):
        if not isinstance(args, tuple):
            args = (args,)
        if len(args) != len(self.shape):
            raise AlgorithmError(f"{_API[self.mode]}({self.name}) has {len(self.shape)} dimensions "
                                 f"but is indexed with {len(args)}")
        idx = index_exprs(args, f"{_API[self.mode]}({self.name})")
        inside = None
        mapped = []
        for a, n in zip(idx, self.shape):
            a = E.cast(T.int64, a)
            hi = n - 1
            if self.mode == "edge" or self.mode == "constant":
                m = a
            elif self.mode == "wrap":
                m = a % n
            else:  # reflect: period 2n-2, the edge value is not repeated
                period = E.binary("max", 2 * n - 2, 1)
                t = a % period
                m = hi - abs(hi - t)
            mapped.append(E.cast(T.int32, E.clamp(m, 0, hi)))
            if self.mode == "constant":
                ok = E.binary("and", a >= 0, a <= hi)
                inside = ok if inside is None else E.binary("and", inside, ok)
        read = self.source[tuple(mapped)]
        if self.mode == "constant":
            return E.select(inside, read, self.value)
        return read


_API = {"edge": "clamp_edge", "wrap": "wrap", "reflect": "mirror", "constant": "constant_exterior"}


def _check_source(source, mode):
    """A boundary condition extends an Input or a Func (or another view), not a value."""
    from .func import Callable
    if isinstance(source, (Callable, BoundaryView)):
        return
    if isinstance(source, E.Expr):
        from .printer import expr_to_str
        got = f"the expression {expr_to_str(source)}"
    else:
        kind = type(source).__name__
        got = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} ({source!r})"
    raise AlgorithmError(f"sl.{_API[mode]}: the source must be an Input or a Func, got {got}; "
                         f"pass the Func itself (sl.{_API[mode]}(A), not A[x]) and index the "
                         "view it returns")


def _lossy(source, v):
    raise AlgorithmError(f"sl.constant_exterior({source.name}, {v}): the value's type {v.dtype} does "
                         f"not fit {source.name}'s {source.dtype}; use sl.cast")


def clamp_edge(f):
    """numpy.pad 'edge': reads outside take the nearest edge value."""
    return BoundaryView(f, "edge")


def wrap(f):
    """numpy.pad 'wrap': indices wrap around periodically."""
    return BoundaryView(f, "wrap")


def mirror(f):
    """numpy.pad 'reflect': mirrored about the edge, the edge value not repeated."""
    return BoundaryView(f, "reflect")


def constant_exterior(f, value):
    """numpy.pad 'constant': reads outside give ``value``."""
    return BoundaryView(f, "constant", value)
