"""The schedule of one stage (a Func's pure definition or one of its updates).

A ``StageSchedule`` holds the stage's loops (outermost first) and how they were made
(splits and fuses), and implements the per-stage primitives. Each primitive checks
legality when called and records one directive in the owning Schedule's trace.
Example: ``io, ii = s[C].split(i, 32); s[C].vectorize(ii, 16)``.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..algo import expr as E
from ..algo import types as T
from ..algo.evaluate import Unbound, evaluate
from ..errors import ScheduleError

from .stage_hardware import HardwareBindings
from .stage_loops import (MAX_UNROLL, MAX_VECTOR_LANES, TAILS, Dim, Split, _int_like,
                          _names_ok, _positive_int, _renamed, loop_directives, too_many_lanes,
                          var_name)


# why a Func computed at the root cannot be stored in a loop
_ROOT_STORE = "it is computed at the root, outside every loop, so no loop can hold its storage"


def _constant_size(x, where, what):
    """``x`` (a bound's lo or extent) as an int when it is one, or a size expression of
    constant value (``A.shape[0]`` of an Input of fixed shape); else ``x`` unchanged for
    the caller's own check, or a ScheduleError for a size known only at run time."""
    x = _int_like(x)
    if isinstance(x, E.Expr):
        try:
            value = evaluate(x, {})
        except Unbound:
            raise ScheduleError(f"{where}: {what} must be an int, got {x}, a size known only "
                                "at run time; bound states a constant region (leave it "
                                "unbounded to follow the sizes)") from None
        return value if x.dtype.is_int else x
    return x


class StageSchedule(HardwareBindings):
    """Schedule of one stage of a Func; obtained as ``s[f]`` or ``s[f].update(n)``."""

    def __init__(self, schedule, func, index, definition):
        self.schedule, self.func, self.index = schedule, func, index
        self.definition = definition
        self.dims = [Dim(v.name, is_rvar=isinstance(v, E.RVar)) for v in definition.loop_vars]
        self.splits: list[Split] = []
        self.bounds: dict = {}
        self.bounds_given_on = None  # the Func the user bound, when cache_write moved them here
        self.tensorized = None      # (loop name, intrinsic)
        self.prefetches = []        # (Func or Input, variable name, distance)
        self._retired = None        # why this handle no longer names a stage (or None)

    def _become(self, other):
        """Take over ``other``'s state, so that a handle the user holds (``st = s[f]``)
        stays the schedule of ``f``'s stage when a directive (cache_write, rfactor) rebuilds
        that stage: its later directives apply where they are recorded."""
        for attr in ("definition", "dims", "splits", "bounds", "bounds_given_on", "tensorized",
                     "prefetches"):
            setattr(self, attr, getattr(other, attr))

    def bound_text(self, name):
        """The ``bound`` directive on ``name`` as the user wrote it, for a message: on the
        Func they bound, which a cache_write may have replaced by its staged copy.
        Example: ``bound(i, 0, 17) on sm (held by its cache_write copy sm_cache)``."""
        lo, extent = self.bounds[name]
        text = f"bound({name}, {lo}, {extent}) on {self.bounds_given_on or self.func.name}"
        if self.bounds_given_on and self.bounds_given_on != self.func.name:
            text += f" (held by its cache_write copy {self.func.name})"
        return text

    def _retire(self, why):
        """This handle's stage is gone (``why`` says how): later directives through it are
        refused instead of changing loops that now belong to another Func."""
        self._retired = why
        self.dims = [d.copy() for d in self.dims]
        self.splits = list(self.splits)

    # ------------------------------------------------------------------ helpers
    @property
    def name(self):
        return self.func.name if self.index == 0 else f"{self.func.name}.update({self.index - 1})"

    def _check_live(self, directive):
        if self._retired:
            raise ScheduleError(f"{directive} on {self.name}: {self._retired}; this stage no "
                                f"longer exists, so schedule s[{self.func.name}] (or the staged "
                                "Func) instead")

    def _dim(self, v, directive):
        self._check_live(directive)
        name = var_name(v, directive, self.name)
        for d in self.dims:
            if d.name == name:
                return d
        loops = ", ".join(d.name for d in self.dims) or "none"
        # a loop that a split or fuse replaced: say so (splitting i twice is a common slip)
        for sp in self.splits:
            if sp.kind == "split" and sp.old == name:
                how = f"was split into {sp.outer} and {sp.inner}"
            elif sp.kind == "fuse" and name in (sp.outer, sp.inner):
                how = f"was fused into {sp.old}"
            else:
                continue
            raise ScheduleError(f"{directive}({name}) on {self.name}: {name} {how}, so it is no "
                                f"longer a loop; use one of its loops: {loops}")
        raise ScheduleError(f"{directive}({name}) on {self.name}: {self.name} has no loop named "
                            f"{name}; its loops are: {loops}")

    def _pos(self, d):
        return next(i for i, x in enumerate(self.dims) if x is d)

    def _record(self, op, args, kwargs=None):
        self._check_live(op)
        self.schedule._record(self, op, args, kwargs or {})

    def _fresh(self, name, directive, keyword="names=(...)"):
        if not isinstance(name, str) or not name or "\x00" in name:
            raise ScheduleError(f"{directive} on {self.name}: {keyword} must give non-empty "
                                f"str names without NUL characters, got {name!r}")
        if any(d.name == name for d in self.dims) or any(
                s.old == name or s.outer == name or s.inner == name for s in self.splits):
            raise ScheduleError(f"{directive} on {self.name}: the loop name {name!r} is already "
                                f"used; pass {keyword} with a new name")
        return name

    def _from_fuse(self, name):
        """Whether loop ``name`` is a fused loop or a piece split from one."""
        for sp in reversed(self.splits):
            if sp.kind == "fuse" and sp.old == name:
                return True
            if sp.kind == "split" and name in (sp.outer, sp.inner):
                return self._from_fuse(sp.old)
        return False

    def _is_output(self):
        return any(self.func is o for o in self.schedule.outputs)

    @contextmanager
    def _atomic(self, directive):
        """Run the primitives a compound directive (tile, gpu_tile, vectorize with a width,
        unroll with a factor) is made of as one step: if one of them is rejected, the stage's
        loops are put back exactly as they were and the error names ``directive``, the call
        the user made, rather than the inner split or reorder. The inner steps are not
        traced."""
        dims_list, dims, splits_list, splits = self.dims, list(self.dims), self.splits, \
            list(self.splits)
        marks = [(d.kind, d.gpu_dim) for d in dims]
        rec = self.schedule._pause()
        try:
            yield
        except ScheduleError as e:
            # restore the very list and Dim objects: a cache_write'd stage may share them
            for d, (kind, gpu_dim) in zip(dims, marks):
                d.kind, d.gpu_dim = kind, gpu_dim
            dims_list[:], splits_list[:] = dims, splits
            self.dims, self.splits = dims_list, splits_list
            raise _renamed(e, directive, self.name) from None
        finally:
            self.schedule._resume(rec)

    def loop_names(self):
        """The stage's loops, outermost first."""
        return [d.name for d in self.dims]

    def update(self, n=0):
        """The schedule of the n-th update stage of this Func (``s[f].update(0)`` is the first)."""
        n = _int_like(n)
        if isinstance(n, bool) or not isinstance(n, int):
            raise ScheduleError(f"update({n!r}) on {self.func.name}: the stage number must be an "
                                f"int (update(0) is the first update), got {type(n).__name__}")
        return self.schedule._stage(self.func, n + 1, f"update({n})")

    # ------------------------------------------------------------------ loop structure
    def split(self, v, factor, tail="auto", names=None):
        """Split loop ``v`` into ``(v.o, v.i)`` with the inner one ``factor`` long.

        Example: ``io, ii = s[C].split(i, 32, tail="guard")``.
        """
        factor = _int_like(factor)
        d = self._dim(v, "split")
        directive = f"split({d.name}, {factor})"
        if not _positive_int(factor):
            raise ScheduleError(f"{directive} on {self.name}: the factor must be a positive int, "
                                f"got {factor!r}")
        if factor > T.MAX_EXTENT:
            raise ScheduleError(f"{directive} on {self.name}: the factor must be at most "
                                f"{T.MAX_EXTENT} (loop variables are int32); a factor at least "
                                f"the loop's extent already makes one outer iteration")
        if tail not in TAILS:
            raise ScheduleError(f"{directive} on {self.name}: tail must be one of "
                                f"{', '.join(TAILS)}, got {tail!r}")
        if d.kind != "serial":
            raise ScheduleError(f"{directive} on {self.name}: {d.name} is already marked "
                                f"{d.kind}; split it before marking it")
        self._check_not_tensorized(d, directive, "split it before tensorizing")
        if tail in ("shift", "pad"):
            if self.index > 0 or d.is_rvar:
                why = (f"{self.name} is an update stage" if self.index > 0
                       else f"{d.name} is a reduction variable")
                raise ScheduleError(f"{directive} on {self.name}: tail='{tail}' recomputes or "
                                    f"adds points, which is only legal on the pure loops of a "
                                    f"pure stage, and {why}; use tail='guard'")
            if tail == "shift" and self.definition.reductions:
                raise ScheduleError(f"{directive} on {self.name}: tail='shift' recomputes "
                                    f"points, which {self.func.name}'s inline reduction would "
                                    "count twice; use tail='guard'")
            if tail == "pad" and self.definition.reductions and self._from_fuse(d.name):
                raise ScheduleError(f"{directive} on {self.name}: {d.name} comes from a fuse, "
                                    "whose padded iterations land back on real points (its "
                                    f"rows and columns are clamped), which {self.func.name}'s "
                                    "inline reduction would count twice; use tail='guard'")
            if tail == "pad" and self._is_output() and factor > 1:   # 1 rounds nothing up
                # 'shift' is no way out for an inline reduction (refused just above)
                other = "" if self.definition.reductions else " or 'shift'"
                raise ScheduleError(f"{directive} on {self.name}: tail='pad' rounds the computed "
                                    f"region up, but {self.func.name} is an output whose storage is "
                                    f"the caller's array; use tail='guard'{other}")
        if names is None:
            names = (f"{d.name}.o", f"{d.name}.i")
        if not _names_ok(names, 2):
            raise ScheduleError(f"{directive} on {self.name}: names must be two non-empty "
                                f"strings (outer, inner), got {names!r}")
        outer, inner = (self._fresh(n, directive) for n in names)
        if outer == inner:
            raise ScheduleError(f"{directive} on {self.name}: the two new names must differ")
        pos = self._pos(d)
        new = list(self.dims)
        new[pos:pos + 1] = [Dim(outer, is_rvar=d.is_rvar), Dim(inner, is_rvar=d.is_rvar)]
        self.schedule._check_placements_in(self, [(x.name, x.kind) for x in new], directive)
        self.dims[pos:pos + 1] = new[pos:pos + 2]
        self.splits.append(Split("split", d.name, outer, inner, factor, tail))
        self._record("split", [d.name, factor], {"tail": tail, "names": [outer, inner]})
        return E.Var(outer), E.Var(inner)

    def fuse(self, vo, vi, name=None):
        """Fuse two adjacent loops (``vo`` directly outside ``vi``) into one."""
        a, b = self._dim(vo, "fuse"), self._dim(vi, "fuse")
        directive = f"fuse({a.name}, {b.name})"
        if a is b:
            raise ScheduleError(f"{directive} on {self.name}: {a.name} is given twice; fuse "
                                f"two adjacent loops of {self.name} "
                                f"({', '.join(self.loop_names())}), the outer one first")
        if self._pos(b) != self._pos(a) + 1:
            raise ScheduleError(f"{directive} on {self.name}: {a.name} must be directly outside "
                                f"{b.name}; the loops are {', '.join(self.loop_names())} "
                                "(reorder first)")
        if a.is_rvar != b.is_rvar:
            raise ScheduleError(f"{directive} on {self.name}: cannot fuse a pure loop with a "
                                f"reduction loop ({(b if a.is_rvar else a).name} is pure, "
                                f"{(a if a.is_rvar else b).name} a reduction loop); fuse two "
                                "pure loops or two reduction loops")
        if a.kind != "serial" or b.kind != "serial":
            marked = a if a.kind != "serial" else b
            raise ScheduleError(f"{directive} on {self.name}: {marked.name} is already marked "
                                f"{marked.kind}; fuse the loops before marking them, then mark "
                                "the fused loop")
        for x in (a, b):
            self._check_not_tensorized(x, directive, "fuse the loops before tensorizing")
        name = self._fresh(name or f"{a.name}.{b.name}.f", directive, "name=...")
        pos = self._pos(a)
        new = list(self.dims)
        new[pos:pos + 2] = [Dim(name, is_rvar=a.is_rvar)]
        self.schedule._check_placements_in(self, [(x.name, x.kind) for x in new], directive)
        self.dims[pos:pos + 2] = new[pos:pos + 1]
        self.splits.append(Split("fuse", name, a.name, b.name))
        self._record("fuse", [a.name, b.name], {"name": name})
        return E.Var(name)

    def reorder(self, *vs):
        """Reorder loops, OUTERMOST FIRST: the named loops take their current positions in
        the given order. Example: ``s[C].reorder(io, jo, ko, ii, ki, ji)``."""
        if len(vs) == 1 and isinstance(vs[0], (list, tuple)):
            vs = tuple(vs[0])
        dims = [self._dim(v, "reorder") for v in vs]
        names = [d.name for d in dims]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ScheduleError(f"reorder({', '.join(names)}) on {self.name}: the loop {twice} is "
                                "named twice; name each loop once, outermost first")
        positions = sorted(self._pos(d) for d in dims)
        new = list(self.dims)
        for p, d in zip(positions, dims):
            new[p] = d
        directive = f"reorder({', '.join(names)})"
        self._check_order(new, directive)
        self._check_gpu_nesting([(d.name, d.kind) for d in new], directive)
        self.schedule._check_placements_in(self, [(d.name, d.kind) for d in new], directive)
        self.dims = new
        self._record("reorder", names)
        return self

    def _check_order(self, new, directive):
        """Reduction loops of a stage whose result depends on visiting order keep their order."""
        why = self.schedule._order_sensitive(self)
        if not why:
            return
        old_r = [d.name for d in self.dims if d.is_rvar]
        new_r = [d.name for d in new if d.is_rvar]
        if old_r != new_r:
            raise ScheduleError(f"{directive} on {self.name}: it changes the order the reduction "
                                f"loops run ({', '.join(old_r)} -> {', '.join(new_r)}), but {why}; "
                                "keep the reduction loops in their order")

    def tile(self, y, x, ty, tx, tail="auto", names=None):
        """Split ``y`` by ``ty`` and ``x`` by ``tx`` and order them yo, xo, yi, xi."""
        ty, tx = _int_like(ty), _int_like(tx)
        dy, dx = self._dim(y, "tile"), self._dim(x, "tile")
        directive = f"tile({dy.name}, {dx.name}, {ty!r}, {tx!r})"
        if dy is dx:
            raise ScheduleError(f"{directive} on {self.name}: {dy.name} is given twice; tile two "
                                f"different loops of {self.name} ({', '.join(self.loop_names())})")
        if not all(_positive_int(f) for f in (ty, tx)):
            raise ScheduleError(f"{directive} on {self.name}: the tile sizes (split factors) must "
                                "be positive ints")
        if names is None:
            names = (f"{dy.name}.o", f"{dx.name}.o", f"{dy.name}.i", f"{dx.name}.i")
        if not _names_ok(names, 4):
            raise ScheduleError(f"{directive} on {self.name}: tile takes 4 names (yo, xo, yi, xi), "
                                f"each a non-empty string, got names={names!r}")
        with self._atomic(directive):
            yo, yi = self.split(dy.name, ty, tail, names=(names[0], names[2]))
            xo, xi = self.split(dx.name, tx, tail, names=(names[1], names[3]))
            self.reorder(yo, xo, yi, xi)
        self._record("tile", [dy.name, dx.name, ty, tx], {"tail": tail, "names": list(names)})
        return yo, xo, yi, xi

    # ------------------------------------------------------------------ loop kinds
    def _markable(self, v, kind, directive):
        """The loop ``v``, checked to be free to become ``kind``."""
        d = self._dim(v, directive)
        if d.kind != "serial" and d.kind != kind:
            raise ScheduleError(f"{directive}({d.name}) on {self.name}: {d.name} is already "
                                f"{d.kind}, and a loop takes one kind; split {d.name} first "
                                f"and mark the outer and inner loops differently")
        return d

    def _check_marks(self, kinds, directive):
        """Marking loops as ``kinds`` ({name: kind}) must not make a Func computed in this
        stage's loops share storage across parallel iterations."""
        loops = [(d.name, kinds.get(d.name, d.kind)) for d in self.dims]
        self.schedule._check_placements_in(self, loops, directive)

    def _mark(self, v, kind, directive, gpu_dim=0):
        d = self._markable(v, kind, directive)
        d.kind, d.gpu_dim = kind, gpu_dim
        return d

    def unroll(self, v, factor=None):
        """Unroll loop ``v`` fully, or split it by ``factor`` and unroll the inner loop."""
        factor = _int_like(factor)
        name = var_name(v, "unroll", self.name)
        if factor is not None:
            directive = f"unroll({name}, {factor!r})"
            if not _positive_int(factor):
                raise ScheduleError(f"{directive} on {self.name}: the factor must be a positive "
                                    "int")
            if factor > MAX_UNROLL:
                raise ScheduleError(f"{directive} on {self.name}: that many copies of the body "
                                    f"(at most {MAX_UNROLL}) would take minutes to compile; "
                                    "unroll by a smaller factor")
            d = self._dim(name, "unroll")
            with self._atomic(directive):
                vi = self._split_inner(d, factor)
                self._mark(vi, "unrolled", "unroll")
            self._record("unroll", [d.name, factor])
            return self
        d = self._markable(name, "unrolled", "unroll")
        self._require_constant_extent(d.name, "unroll", f"a factor (unroll({name}, 4))")
        self._mark(d.name, "unrolled", "unroll")
        self._record("unroll", [d.name])
        return self

    def _split_inner(self, d, factor):
        """The inner loop of ``split(d, factor)`` for ``unroll`` / ``vectorize`` with a
        factor; a parallel ``d`` stays parallel in its outer loop (as in Halide), so
        ``parallel(j)`` then ``vectorize(j, 16)`` runs 16-lane pieces on the threads."""
        if d.kind != "parallel":
            return self.split(d.name, factor)[1]
        d.kind = "serial"
        vo, vi = self.split(d.name, factor)
        self._mark(vo.name, "parallel", "parallel")
        return vi

    def _require_constant_extent(self, name, directive, instead):
        """Refuse ``directive(name)`` without a factor on a loop whose extent is symbolic:
        its lanes / copies must be known when the code is generated."""
        ext = self._symbolic_extent(name)
        if ext is not None:
            raise ScheduleError(f"{directive}({name}) on {self.name}: its extent is not a "
                                f"compile-time constant (it depends on {ext}); {directive} with "
                                f"{instead} or split it first{self._bound_hint(name)}")

    def vectorize(self, v, width=None):
        """Run loop ``v`` as SIMD lanes; with ``width``, split by it first and vectorize the
        inner loop. Example: ``s[C].vectorize(ji, 16)``."""
        width = _int_like(width)
        d = self._dim(v, "vectorize")
        if d.is_rvar:
            raise ScheduleError(f"vectorize({d.name}) on {self.name}: {d.name} is a reduction "
                                f"variable; {self._reduction_loop_advice()}")
        if width is not None:
            directive = f"vectorize({d.name}, {width!r})"
            if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= 256:
                raise ScheduleError(f"{directive} on {self.name}: the width must be an int in "
                                    "[1, 256]")
            with self._atomic(directive):
                vi = self._split_inner(d, width)
                self._mark(vi, "vectorized", "vectorize")
            self._record("vectorize", [d.name, width])
            return self
        self._markable(d.name, "vectorized", "vectorize")
        self._require_constant_extent(d.name, "vectorize", f"a width (vectorize({d.name}, 8))")
        ext = self._known_extent(d.name)
        dim = self._pure_dimension(d.name)
        if ext is None and dim is not None:
            ext = self._pure_stage().bounds.get(self._dimension_name(dim), (0, None))[1]
        if isinstance(ext, int) and ext > MAX_VECTOR_LANES:
            raise ScheduleError(too_many_lanes(f"vectorize({d.name}) on {self.name}", d.name,
                                               ext))
        self._mark(d.name, "vectorized", "vectorize")
        self._record("vectorize", [d.name])
        return self

    def _reduction_loop_advice(self):
        """What to do instead of running a reduction loop in parallel / SIMD: rfactor on a
        pure definition's inline reduction or an update f[x] = f[x] + e (or *, min, max);
        any other update's reduction runs in order."""
        from .rfactor import update_combine
        if self.index == 0 or update_combine(self) is not None:
            return "use rfactor first (it makes part of the reduction a pure loop)"
        pure = [d.name for d in self.dims if not d.is_rvar]
        return ("the reduction loop of an update stage runs in order; use one of its pure "
                f"loops ({', '.join(pure)}) instead" if pure else
                "the reduction loop of an update stage runs in order, and this one has no pure "
                "loop to use instead")

    def parallel(self, v):
        """Run the iterations of loop ``v`` on CPU threads."""
        d = self._dim(v, "parallel")
        if d.is_rvar:
            raise ScheduleError(f"parallel({d.name}) on {self.name}: {d.name} is a reduction "
                                "variable and its iterations depend on each other; "
                                f"{self._reduction_loop_advice()}")
        self._markable(d.name, "parallel", "parallel")
        self._check_marks({d.name: "parallel"}, f"parallel({d.name})")
        self._mark(d.name, "parallel", "parallel")
        self._record("parallel", [d.name])
        return self

    def prefetch(self, source, v, distance=1):
        """Beside every read of ``source`` (an Input, or a Func with storage) in this stage,
        ask the CPU to fetch what that read will touch when variable ``v`` is ``distance``
        further on, so the memory latency of later iterations overlaps this one's work.
        ``v`` is a loop of this stage or a variable it was split or fused from. A hint: it
        never faults (a fetch past the end of the data is dropped) and never changes a
        result. Example: in a row softmax, ``s[e].prefetch(X, i)`` fetches row i + 1 of X
        while row i's exponentials are computed."""
        distance = _int_like(distance)
        g = self.schedule.lookup(source, f"prefetch on {self.name}")
        name = var_name(v, "prefetch", self.name)
        directive = f"prefetch({g.name}, {name})"
        if not self._has_variable(name):
            loops = ", ".join(d.name for d in self.dims) or "none"
            raise ScheduleError(f"{directive} on {self.name}: {self.name} has no variable named "
                                f"{name}; its loops are: {loops}")
        if isinstance(distance, bool) or not isinstance(distance, int) or distance == 0:
            raise ScheduleError(f"{directive} on {self.name}: distance must be a nonzero int "
                                f"(iterations of {name} ahead), got {distance!r}")
        if g is not self.func and not self.schedule._uses(self.func, g):
            raise ScheduleError(f"{directive} on {self.name}: {self.func.name} does not read "
                                f"{g.name}; prefetch a Func or Input this stage reads")
        self.prefetches.append((g, name, distance))
        self._record("prefetch", [g.name, name, distance])
        return self

    def _has_variable(self, name):
        """``name`` is a loop of this stage, or a variable a split or fuse consumed."""
        return any(d.name == name for d in self.dims) or any(
            name in (sp.old, sp.outer, sp.inner) for sp in self.splits)

    def _known_extent(self, name):
        """The constant extent of a loop when the schedule alone fixes it: the inner loop of
        a split, or an RDom dimension of constant extent; else None."""
        for sp in self.splits:
            if sp.kind == "split" and sp.inner == name:
                return sp.factor
        for var in self.definition.loop_vars:
            if var.name == name and isinstance(var, E.RVar):
                ext = var.rdom.bounds[var.dim][1]
                return ext.value if isinstance(ext, E.Const) else ext if isinstance(ext, int) \
                    else None
        return None

    def _symbolic_extent(self, name):
        """The extent of loop ``name`` when the schedule alone shows it is not a constant: a
        pure dimension of an output over a symbolic size that no bound() fixes, an RDom
        dimension of symbolic extent, or a split's outer loop / a fused loop made from one;
        else None (a constant, or known only once bounds inference has run)."""
        for sp in self.splits:
            if sp.kind == "split" and sp.outer == name:
                return self._symbolic_extent(sp.old)
            if sp.kind == "fuse" and sp.old == name:
                outer = self._symbolic_extent(sp.outer)
                return outer if outer is not None else self._symbolic_extent(sp.inner)
        for var in self.definition.loop_vars:
            if var.name != name:
                continue
            if isinstance(var, E.RVar):
                ext = var.rdom.bounds[var.dim][1]
            elif self._is_output() and self.func.shape is not None:
                # every stage of an output loops a pure variable over the output's region
                # along the dimension it indexes: the shape, unless bound() fixed it
                dim = self._pure_dimension(name)
                if dim is None or self._dimension_name(dim) in self._pure_stage().bounds:
                    return None
                ext = self.func.shape[dim]
            else:
                return None
            return None if isinstance(ext, (int, E.Const)) else ext
        return None

    def _pure_stage(self):
        return self.schedule.stage_schedules(self.func)[0]

    def _pure_dimension(self, name):
        """The dimension of the Func that this stage's pure variable ``name`` indexes (None
        for a reduction variable, as in a scan's ``f[r] = ...``: bound() does not fix it)."""
        return next((i for i, a in enumerate(self.definition.args)
                     if isinstance(a, E.Var) and not isinstance(a, E.RVar)
                     and a.name == name), None)

    def _dimension_name(self, dim):
        """The name of dimension ``dim`` in the Func's pure definition (what bound() takes)."""
        return self.func.definitions[0].args[dim].name

    def _bound_hint(self, name):
        """How bound() could make loop ``name`` constant, when it is a dimension of the Func."""
        dim = self._pure_dimension(name)
        if dim is None or not self._is_output():
            return ""
        pure = self._dimension_name(dim)
        return f", or state its extent with s[{self.func.name}].bound({pure}, 0, n)"

    def _output_size(self, name):
        """The shape of this output Func along its pure dimension ``name``."""
        return self.func.shape[[a.name for a in self.func.definitions[0].args].index(name)]

    def bound(self, v, lo, extent):
        """Fix the region computed along pure dimension ``v`` to [lo, lo + extent); checked
        when the kernel runs (an output's region is its shape: ``bound(j, 0, 64)`` states that
        its extent along j is 64, so its loops have a constant extent).
        Example: ``s[C].bound(j, 0, 1024)``."""
        name = var_name(v, "bound", self.name)
        lo, extent = (_constant_size(x, f"bound({name}) on {self.name}", what)
                      for x, what in ((lo, "lo"), (extent, "extent")))
        d0 = self.func.definitions[0]
        if self.index != 0 or all(a.name != name for a in d0.args):
            raise ScheduleError(f"bound({name}) on {self.name}: bound applies to a pure dimension "
                                f"of {self.func.name} ({', '.join(a.name for a in d0.args)}), on "
                                f"s[{self.func.name}]")
        for x, what in ((lo, "lo"), (extent, "extent")):
            if isinstance(x, bool) or not isinstance(x, int):
                raise ScheduleError(f"bound({name}) on {self.name}: {what} must be an int, got {x!r}")
        if extent < 1:
            raise ScheduleError(f"bound({name}) on {self.name}: extent must be >= 1, got {extent}")
        if lo < -T.MAX_EXTENT - 1 or lo + extent - 1 > T.MAX_EXTENT:
            raise ScheduleError(f"bound({name}, {lo}, {extent}) on {self.name}: [lo, lo + extent) "
                                f"must lie inside the int32 range (loop variables are int32)")
        if self._is_output():
            size = self._output_size(name)
            try:        # a shape like A.shape[0] - 2 of a static Input is a number
                size = int(evaluate(size, {}))
            except Unbound:
                pass
            if lo != 0 or (isinstance(size, int) and size != extent):
                raise ScheduleError(f"bound({name}, {lo}, {extent}) on {self.name}: "
                                    f"{self.func.name} is an output, whose region along {name} "
                                    f"is [0, {size}); bound it to that or leave it unbounded")
        self.bounds[name] = (lo, extent)
        self._record("bound", [name, lo, extent])
        return self

    # --------------------------------------------------------- per-Func directives
    def _func_directive(self, directive):
        if self.index != 0:
            raise ScheduleError(f"{directive} on {self.name}: it places the whole Func "
                                f"{self.func.name}; call it on s[{self.func.name}], not on an "
                                "update stage")
        return self.schedule._func_sched(self.func, directive)

    def compute_root(self):
        """Compute this Func in full before its consumers, at the top of the pipeline."""
        fs = self._func_directive("compute_root")
        if fs.double_buffer:
            raise ScheduleError(f"compute_root on {self.func.name}: {self.func.name} is "
                                "double-buffered (double_buffer()), which needs it computed "
                                "inside a serial loop of a consumer, not once at the root; "
                                "keep it at compute_at(consumer, loop), or build the schedule "
                                "without double_buffer")
        fs.compute, fs.store, fs.compute_given = ("root",), None, True
        self._record("compute_root", [])
        return self

    def compute_inline(self):
        """Substitute this Func's expression into every use (pure Funcs only)."""
        fs = self._func_directive("compute_inline")
        f = self.func
        if self._is_output():
            raise ScheduleError(f"compute_inline on {f.name}: {f.name} is an output of the "
                                "schedule and must be stored into the result array; leave it "
                                "out, or inline one of the Funcs it reads instead")
        if len(f.definitions) > 1 or self.schedule._defn(f, 0).reductions:
            raise ScheduleError(f"compute_inline on {f.name}: {f.name} has a reduction or update "
                                "stages and cannot be inlined; use compute_root or compute_at")
        looped = loop_directives(self.schedule, f)
        if looped:
            # a double-buffered Func needs a consumer's loop: compute_root would not do
            stored = "compute_at" if looped.startswith("double_buffer") else \
                "compute_root or compute_at"
            raise ScheduleError(f"compute_inline on {f.name}: {looped} schedules loops of "
                                f"{f.name}, but an inlined Func has no loops; build the "
                                f"schedule without it, or keep {f.name} stored ({stored})")
        placed = self.schedule.placed_in(f)
        if placed:
            g, level, how = placed[0]
            raise ScheduleError(f"compute_inline on {f.name}: {g.name} is {how} at "
                                f"{self.schedule._level_text(level)}, a loop of "
                                f"{f.name}, but an inlined Func has no loops; place {g.name} "
                                "elsewhere first (compute_root, or compute_at another "
                                "consumer)")
        fs.compute, fs.store = ("inline",), None
        self._record("compute_inline", [])
        return self

    def compute_at(self, consumer, v):
        """Compute this Func inside loop ``v`` of ``consumer``, just the region needed there."""
        fs = self._func_directive("compute_at")
        level = self.schedule._loop_level(self.func, consumer, v, "compute_at")
        spelled = self.schedule._level_spelling(self.func, level)
        directive = f"compute_at({level[1].name}, {spelled})"
        self.schedule._check_one_stage_reads(self.func, level, directive, self.name)
        self.schedule._check_placement(self.func, fs.store, level, directive, self.name)
        self.schedule._check_double_buffer_loop(self.func, level, directive, self.name)
        old, fs.compute = fs.compute, level
        why = self.schedule._gpu_nesting_problem()
        if why:
            fs.compute = old
            raise ScheduleError(f"{directive} on {self.name}: {why}")
        self._record("compute_at", [level[1].name, spelled])
        return self

    def store_at(self, consumer, v):
        """Allocate this Func's storage at loop ``v`` of ``consumer`` (outside its compute
        level), so it is reused across the loops in between."""
        fs = self._func_directive("store_at")
        level = self.schedule._loop_level(self.func, consumer, v, "store_at")
        spelled = self.schedule._level_spelling(self.func, level)
        directive = f"store_at({level[1].name}, {spelled})"
        self.schedule._check_one_stage_reads(self.func, level, directive, self.name)
        self.schedule._check_placement(self.func, level, fs.compute, directive, self.name)
        if fs.compute == ("root",) and fs.compute_given:
            raise ScheduleError(f"{directive} on {self.name}: {_ROOT_STORE}; call "
                                f"compute_at({level[1].name}, {spelled}) (or at a loop inside "
                                "it) instead of compute_root, or leave the store at the root")
        fs.store = level
        self._record("store_at", [level[1].name, spelled])
        return self

    def store_root(self):
        """Allocate this Func's storage at the top of the pipeline."""
        fs = self._func_directive("store_root")
        self.schedule._check_placement(self.func, ("root",), fs.compute, "store_root",
                                       self.name)
        fs.store = ("root",)
        self._record("store_root", [])
        return self

    def double_buffer(self):
        """Keep two copies of this (staged) Func computed inside a serial loop: the next
        iteration's copy is filled while the current one is used."""
        fs = self._func_directive("double_buffer")
        if self._is_output():
            raise ScheduleError(f"double_buffer on {self.func.name}: {self.func.name} is an "
                                "output of the schedule, written once into the caller's array; "
                                "double_buffer applies to a staged Func (cache_read / "
                                "cache_write) or an intermediate computed inside a serial loop "
                                "of its consumer (compute_at)")
        explicit_inline = fs.compute == ("inline",) and any(
            d.func == self.func.name and d.op == "compute_inline" for d in self.schedule.trace)
        if (fs.compute == ("root",) and fs.compute_given) or explicit_inline:
            how = "at the root (compute_root())" if fs.compute == ("root",) else \
                "inline (compute_inline())"
            raise ScheduleError(f"double_buffer on {self.func.name}: {self.func.name} is "
                                f"computed {how}, not inside a loop, so there is no next "
                                "iteration's copy to load; double buffering needs it computed "
                                "inside a serial loop of a consumer: call compute_at(consumer, "
                                "loop) first")
        fs.double_buffer = True
        try:
            self.schedule._check_double_buffer_loop(self.func, fs.compute, "double_buffer",
                                                    self.func.name)
        except ScheduleError:
            fs.double_buffer = False
            raise
        self._record("double_buffer", [])
        return self

    def cache_read(self, consumer, memory="shared", name=None):
        """Stage a copy of this Func / Input for ``consumer``, whose reads are redirected to
        the copy. Returns the staged Func (schedule it with compute_at)."""
        return self.schedule._cache_read(self, consumer, memory, name)

    def cache_write(self, memory="local", name=None):
        """Compute this Func into a staged Func in ``memory`` and copy the result out.
        Returns the staged Func. The staged Func computes what this one did, so it takes
        this Func's loops as scheduled so far (splits, order, marks, and the producers
        placed in them); this Func's stage becomes the copy-out, with fresh loops.
        Example: ``acc = s[C].cache_write("local"); jo, ji = s[C].split(j, 64);
        s[acc].compute_at(C, jo)`` (``jo`` is a loop of the copy-out, split after this)."""
        return self.schedule._cache_write(self, memory, name)

    def rfactor(self, rv, name=None):
        """Turn reduction loop ``rv`` into a pure dimension of a new intermediate Func that
        holds partial results; this stage then reduces over that dimension. Returns it."""
        return self.schedule._rfactor(self, rv, name)

    def __repr__(self):
        return f"<schedule of {self.name}: loops {', '.join(self.loop_names())}>"
