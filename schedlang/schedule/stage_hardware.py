"""The per-stage primitives that bind loops to hardware: GPU blocks and threads
(``gpu_blocks``, ``gpu_threads``, ``gpu_tile``) and tensor instructions (``tensorize``), as
a mixin of ``StageSchedule``, which provides the loops (``self.dims``) and the checks
every primitive shares (``_dim``, ``_markable``, ``_mark``, ``_record``, ...).
Example: ``s[f].gpu_tile(y, x, 16, 16)``; ``s[acc].tensorize("j.i", vpdpbusd)``.
"""
from __future__ import annotations

from ..errors import ScheduleError

from .stage_loops import _int_like, _positive_int


class HardwareBindings:
    """GPU and tensor-instruction bindings of a stage's loops (mixed into StageSchedule)."""

    def _gpu(self, kind, vs, directive):
        if len(vs) == 1 and isinstance(vs[0], (list, tuple)):
            vs = tuple(vs[0])
        if not 1 <= len(vs) <= 3:
            raise ScheduleError(f"{directive} on {self.name}: give 1 to 3 loops (x, y, z)")
        # check every loop before binding any, so a rejected call changes nothing
        dims = []
        for v in vs:
            d = self._markable(v, kind, directive)
            if d.is_rvar:
                raise ScheduleError(f"{directive}({d.name}) on {self.name}: {d.name} is a "
                                    f"reduction variable; {self._reduction_loop_advice()}")
            if any(d is x for x in dims):
                raise ScheduleError(f"{directive}({', '.join(x.name for x in dims + [d])}) on "
                                    f"{self.name}: {d.name} is given twice; bind each loop once")
            dims.append(d)
        call = f"{directive}({', '.join(d.name for d in dims)})"
        axes = "blockIdx" if kind == "gpu_block" else "threadIdx"
        for i, d in enumerate(dims):
            other = next((x for x in self.dims if x.kind == kind and x.gpu_dim == i
                          and not any(x is e for e in dims)), None)
            if other is not None:
                raise ScheduleError(f"{call} on {self.name}: {other.name} is already bound to "
                                    f"{axes}.{'xyz'[i]}, where this call binds {d.name}; bind "
                                    f"all the {directive} loops of {self.name} in one call")
        self._check_gpu_nesting([(x.name, kind if any(x is d for d in dims) else x.kind)
                                 for x in self.dims], call)
        self._check_marks({d.name: kind for d in dims}, call)
        for i, d in enumerate(dims):
            self._mark(d.name, kind, directive, gpu_dim=i)
        return [d.name for d in dims]

    def _check_gpu_nesting(self, loops, directive):
        """GPU thread loops run inside GPU block loops: with ``loops`` ((name, kind) pairs,
        outermost first) no gpu_threads loop may enclose a gpu_blocks loop."""
        first = next((i for i, (_, k) in enumerate(loops) if k == "gpu_thread"), None)
        inside = [n for n, k in loops[first:] if k == "gpu_block"] if first is not None else []
        if inside:
            raise ScheduleError(f"{directive} on {self.name}: the gpu_threads loop "
                                f"{loops[first][0]} would enclose the gpu_blocks loop "
                                f"{inside[0]} (loops, outermost first: "
                                f"{', '.join(n for n, _ in loops)}); thread loops run inside "
                                "block loops, so reorder to put the block loops outside")

    def gpu_blocks(self, *vs):
        """Bind loops to GPU blocks (first var -> blockIdx.x)."""
        names = self._gpu("gpu_block", vs, "gpu_blocks")
        self._record("gpu_blocks", names)
        return self

    def gpu_threads(self, *vs):
        """Bind loops to GPU threads (first var -> threadIdx.x)."""
        names = self._gpu("gpu_thread", vs, "gpu_threads")
        self._record("gpu_threads", names)
        return self

    def gpu_tile(self, *args, tail="auto"):
        """``gpu_tile(x, tx)`` or ``gpu_tile(y, x, ty, tx)``: split, bind outer loops to blocks
        and inner loops to threads. Returns the new loops (outer ones first)."""
        n = len(args) // 2
        if len(args) not in (2, 4, 6):
            raise ScheduleError(f"gpu_tile on {self.name}: give vars then sizes, e.g. "
                                "gpu_tile(y, x, 16, 16)")
        vs, sizes = args[:n], [_int_like(x) for x in args[n:]]
        names = [self._dim(v, "gpu_tile").name for v in vs]
        directive = f"gpu_tile({', '.join(names + [repr(x) for x in sizes])})"
        if not all(_positive_int(f) for f in sizes):
            raise ScheduleError(f"{directive} on {self.name}: the tile sizes (split factors) must "
                                "be positive ints")
        if len(set(names)) != len(names):
            raise ScheduleError(f"{directive} on {self.name}: a loop is given twice; tile "
                                f"different loops of {self.name} ({', '.join(self.loop_names())})")
        with self._atomic(directive):
            pairs = [self.split(v, f, tail) for v, f in zip(names, sizes)]
            outs, ins = [p[0] for p in pairs], [p[1] for p in pairs]
            self.reorder(*(outs + ins))
            self.gpu_blocks(*reversed(outs))
            self.gpu_threads(*reversed(ins))
        self._record("gpu_tile", names + list(sizes), {"tail": tail})
        return tuple(outs + ins)

    def tensorize(self, v, intrinsic):
        """Replace the loop nest under ``v`` by the hardware instruction ``intrinsic`` (from
        ``schedlang.intrinsics``): ``v`` becomes the instruction's lanes and the one loop
        under it its reduction steps. The loop structure is checked now; that the nest
        computes exactly the instruction's semantics is checked when lowering.

        Example: ``s[acc].tensorize("j.i", sl.intrinsics.vpdpbusd)``.
        """
        from ..intrinsics import INTRINSICS, lookup
        d = self._dim(v, "tensorize")
        intr = lookup(intrinsic)
        if intr is None:
            raise ScheduleError(f"tensorize({d.name}) on {self.name}: {intrinsic!r} is not an "
                                "intrinsic from schedlang.intrinsics (available: "
                                f"{', '.join(INTRINSICS)})")
        if INTRINSICS.get(intr.name) is not intr:
            # lowering, code generation and the schedule's text find the instruction by name
            raise ScheduleError(f"tensorize({d.name}) on {self.name}: {intr!r} is not one of "
                                "the instructions of schedlang.intrinsics (available: "
                                f"{', '.join(INTRINSICS)}); tensorize onto one of those, or "
                                "leave the loop nest to the vectorizer")
        where = f"tensorize({d.name}, {intr.name}) on {self.name}"
        nest = self.dims[self._pos(d):]
        if not any(x.is_rvar for x in self.dims) and len(self.func.definitions) > 1 \
                and self.index == 0:
            raise ScheduleError(f"{where}: {self.name} has no reduction loop ({intr.name} "
                                f"replaces a lane loop and a reduction loop of "
                                f"{intr.shape_text()}); tensorize the stage that reduces, "
                                f"s[{self.func.name}].update(n)")
        if len(nest) != 2:
            raise ScheduleError(f"{where}: {intr.name} replaces exactly 2 loops "
                                f"({intr.shape_text()}), but {d.name} and the loops under it are "
                                f"{', '.join(x.name for x in nest)}; reorder so that exactly one "
                                f"reduction loop is innermost, under {d.name}")
        if d.is_rvar or not nest[1].is_rvar:
            raise ScheduleError(f"{where}: {d.name} must be a pure loop (the instruction's "
                                f"{intr.lanes} lanes) and the loop under it a reduction loop "
                                f"({intr.depth} steps); here they are {d.name} and {nest[1].name}")
        for x, want in zip(nest, (intr.lanes, intr.depth)):
            if x.kind != "serial":
                raise ScheduleError(f"{where}: {x.name} is marked {x.kind}; the instruction "
                                    "replaces the loop, so leave it unmarked")
            ext = self._known_extent(x.name)
            if ext is not None and ext != want:
                raise ScheduleError(f"{where}: {intr.name} needs {intr.shape_text()}, but "
                                    f"{x.name} has extent {ext}; split it by {want}")
        self.tensorized = (d.name, intr.name)
        self._record("tensorize", [d.name, intr.name])
        return self

    def _check_not_tensorized(self, d, directive, instead):
        """Refuse to replace loop ``d`` when it is the lane loop of a ``tensorize``: the
        instruction would name a loop that no longer exists."""
        if self.tensorized is not None and self.tensorized[0] == d.name:
            raise ScheduleError(f"{directive} on {self.name}: {d.name} is tensorized "
                                f"(tensorize({d.name}, {self.tensorized[1]})), and the "
                                f"instruction replaces the loop {d.name} as it is; {instead}, "
                                "or build the schedule without that tensorize")
