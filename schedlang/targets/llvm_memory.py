"""Memory access of the LLVM code generator, as a mixin of ``LLVMCodegen``.

``MemoryCodegen`` holds ``stmt_Store`` and ``expr_Load`` and how they address memory:
one vector access for a stride-1 ramp, a base pointer plus constant offsets for a
constant stride, a run-time choice between one vector load, a masked one and lane-by-lane
loads for a clamped ramp (what boundary conditions make), and lane by lane otherwise.
Every access is tagged with its buffer's alias scope. It relies on the host class for
``self.b``, ``self.module``, ``self.expr``, ``self._buffer``, ``self._new_block``,
``self._splat``, ``self._intrinsic``, ``self._const_like``, ``self.dense_lets`` and
``self.fs.tagged``, and counts the streaming stores it emits in ``self.streaming_stores``
(the host fences them before other threads may read).
Example::

    class LLVMCodegen(MemoryCodegen, ArithmeticCodegen):
        ...
"""
from __future__ import annotations

from llvmlite import ir

from ..algo import expr as E
from ..algo.types import DType
from ..lower import ir as L
from ..lower.simplify import const_value
from .llvm_types import I1, I8, I32, I64, _const_int, _mangle, mem_type, mem_type_bytes


def _split_uniform_offset(e):
    """``(rest, offset)`` for a vector index ``broadcast(offset) + rest`` (either order),
    else ``(e, None)``."""
    if isinstance(e, E.BinOp) and e.op == "add":
        if isinstance(e.a, L.Broadcast):
            return e.b, e.a.value
        if isinstance(e.b, L.Broadcast):
            return e.a, e.b.value
    return e, None


_LINE_BYTES = 64   # a cache line on every CPU target we compile for


def _accumulates(s):
    """Is ``s`` an accumulation, ``buf[i] = buf[i] + x`` (or ``-``): a reduction's update, in
    memory or in a promoted register? Only there may ``x = a*b`` fuse with the add."""
    v = s.value
    if not (isinstance(v, E.BinOp) and v.op in ("add", "sub") and v.dtype.is_float):
        return False
    own = [x for x in (v.a, v.b) if isinstance(x, L.Load) and x.buffer == s.buffer
           and E.same(x.index, s.index)]
    return bool(own) and (v.op == "add" or v.a is own[0])


class MemoryCodegen:
    def stmt_Store(self, s):
        ptr, _ = self._buffer(s.buffer)
        dt = s.value.dtype
        self.accumulation = s.value if _accumulates(s) else None
        try:
            value = self._to_memory(self.expr(s.value), dt)
        finally:
            self.accumulation = None
        elem = mem_type(dt)
        align = mem_type_bytes(dt)
        lanes = s.index.dtype.lanes
        if lanes == 1:
            self._alias(self.b.store(value, self._element_ptr(ptr, self._index(s.index), elem),
                                     align=align), s.buffer)
            return
        base = self._dense_ramp_base(s.index)
        if base is not None:
            self._dense_store(s, value, self._element_ptr(ptr, base, elem), align)
            return
        # A scatter: lane by lane, in lane order (the last lane wins on a repeated index).
        lane_ptrs = self._strided_lane_ptrs(ptr, s.index, elem)
        index = None if lane_ptrs else self._index(s.index)
        for lane in range(lanes):
            p = lane_ptrs[lane] if lane_ptrs else self._element_ptr(
                ptr, self.b.extract_element(index, I32(lane)), elem)
            self._alias(self.b.store(self.b.extract_element(value, I32(lane)), p, align=align),
                        s.buffer)

    def _dense_store(self, s, value, p, align):
        """A vector store to consecutive elements; a streaming one (``s.streaming``, set by
        ``mark_streaming_stores``) bypasses the caches when its condition holds. LLVM emits
        the widest non-temporal store the alignment it can prove allows."""
        if s.streaming is None:
            self._alias(self.b.store(value, p, align=align), s.buffer)
            return
        self.streaming_stores += 1
        cond = const_value(s.streaming)
        if cond is not None:
            self._streaming_store(s, value, p, align)
            return
        with self.b.if_else(self._scalar_cond(s.streaming)) as (streaming, cached):
            with streaming:
                self._streaming_store(s, value, p, align)
            with cached:
                self._alias(self.b.store(value, p, align=align), s.buffer)

    def _streaming_store(self, s, value, p, align):
        st = self._alias(self.b.store(value, p, align=align), s.buffer)
        st.set_metadata("nontemporal", self.module.add_metadata([I32(1)]))

    def stmt_FlatPrefetch(self, s):
        """``llvm.prefetch`` (read, keep in all cache levels) of the lines the index touches:
        every 64 bytes of a dense vector, each lane of another one. The address is computed
        without ``inbounds``: a prefetch may point past its buffer, where it does nothing."""
        ptr, dt = self._buffer(s.buffer)
        elem, size = mem_type(dt), mem_type_bytes(dt)
        fn = self.module.globals.get("llvm.prefetch.p0") or ir.Function(
            self.module, ir.FunctionType(ir.VoidType(), [ptr.type, I32, I32, I32]),
            "llvm.prefetch.p0")
        lanes = s.index.dtype.lanes
        base = (self._index(s.index) if lanes == 1
                else self._dense_ramp_base(_without_lane_clamps(s.index)))
        if base is not None:
            offsets = range(0, max(lanes * size, 1), _LINE_BYTES)
            addrs = [self.b.gep(ptr, [base if off == 0 else self.b.add(
                base, ir.Constant(base.type, off // size))], source_etype=elem)
                for off in offsets]
        else:
            index = self._index(s.index)
            addrs = [self.b.gep(ptr, [self.b.extract_element(index, I32(lane))],
                                source_etype=elem) for lane in range(lanes)]
        for p in addrs:
            # tagged like a load of its buffer: LLVM otherwise counts a prefetch as a
            # write to any memory, which keeps a tensorized tile's accumulators in memory
            self._alias(self.b.call(fn, [p, I32(0), I32(3), I32(1)]), s.buffer)

    def expr_Load(self, e):
        ptr, _ = self._buffer(e.buffer)
        dt = e.dtype
        elem = mem_type(dt)
        align = mem_type_bytes(dt)
        lanes = e.index.dtype.lanes
        if lanes == 1:
            v = self.b.load(self._element_ptr(ptr, self._index(e.index), elem), typ=elem,
                            align=align)
            return self._from_memory(self._alias(v, e.buffer), dt)
        base = self._dense_ramp_base(e.index)
        if base is not None:
            v = self.b.load(self._element_ptr(ptr, base, elem), typ=ir.VectorType(elem, lanes),
                            align=align)
            return self._from_memory(self._alias(v, e.buffer), dt)
        clamped = self._clamped_dense_ramp(e.index)
        if clamped is not None:
            return self._from_memory(self._clamped_load(ptr, e, clamped, elem, align), dt)
        return self._from_memory(self._gather(ptr, e.index, elem, align, e.buffer), dt)

    def _gather(self, ptr, index_expr, elem, align, buffer, index=None):
        """A vector load lane by lane (the backend may still combine them). With a constant
        stride the lane addresses are one base plus constant offsets, not vector math.
        ``index``: the index vector when the caller has computed it already."""
        lanes = index_expr.dtype.lanes
        lane_ptrs = None if index is not None else self._strided_lane_ptrs(ptr, index_expr,
                                                                            elem)
        if index is None and not lane_ptrs:
            index = self._index(index_expr)
        v = ir.Constant(ir.VectorType(elem, lanes), ir.Undefined)
        for lane in range(lanes):
            p = lane_ptrs[lane] if lane_ptrs else self._element_ptr(
                ptr, self.b.extract_element(index, I32(lane)), elem)
            v = self.b.insert_element(v, self._alias(self.b.load(p, typ=elem, align=align),
                                                     buffer), I32(lane))
        return v

    def _clamped_dense_ramp(self, e):
        """(offset or None, ramp, lo or None, hi or None) for an index ``offset +
        clamp(ramp, lo, hi)``, ``offset + max(ramp, lo)`` or ``offset + min(ramp, hi)`` with a
        stride-1 ramp and scalar bounds (what boundary conditions make; the simplifier drops
        the side that cannot bind), else None."""
        e, offset = _split_uniform_offset(e)
        if not (isinstance(e, E.BinOp) and e.op in ("min", "max")
                and isinstance(e.b, L.Broadcast)):
            return None
        bound = {e.op: e.b.value}
        inner = e.a
        if (isinstance(inner, E.BinOp) and inner.op in ("min", "max") and inner.op != e.op
                and isinstance(inner.b, L.Broadcast)):
            bound[inner.op] = inner.b.value
            inner = inner.a
        if not (isinstance(inner, L.Ramp) and _const_int(inner.stride) == 1
                and not inner.dtype.is_float):
            return None
        return offset, inner, bound.get("max"), bound.get("min")

    def _clamped_load(self, ptr, e, clamped, elem, align):
        """A load at a clamped ramp: one vector load when the whole ramp lies inside the
        clamp bounds (the common, interior case); one element broadcast when it lies wholly
        on one side (every lane clamps to the same bound: the branches of a concat not
        taken here, a wide border); else, for 32/64-bit lanes, a masked load of the lanes
        inside with the edge values filled in (a border vector of a padded image: lane by
        lane, it made a 56-wide padding copy 11x slower than a copy), else lane by lane."""
        offset, ramp, lo, hi = clamped
        b = self.b
        # every expression is evaluated before the branch: values cached for later reuse
        # must dominate their uses
        index = self._index(e.index)
        first = self._index(ramp.base)
        last = b.add(first, I64(ramp.lanes - 1))
        lo_v = self._index(lo) if lo is not None else None
        hi_v = self._index(hi) if hi is not None else None
        checks = ([b.icmp_signed(">=", first, lo_v)] if lo is not None else []) + (
            [b.icmp_signed("<=", last, hi_v)] if hi is not None else [])
        inside = checks[0] if len(checks) == 1 else b.and_(*checks)
        start = first if offset is None else b.add(first, self._index(offset))
        # all lanes below lo give min(lo, hi); all at or above hi give hi (clamp's order)
        sides = []
        if lo is not None:
            low_value = lo_v if hi is None else b.select(b.icmp_signed("<", lo_v, hi_v),
                                                         lo_v, hi_v)
            sides.append((b.icmp_signed("<=", last, lo_v), low_value))
        if hi is not None:
            sides.append((b.icmp_signed(">=", first, hi_v), hi_v))
        one_side = sides[0][0] if len(sides) == 1 else b.or_(sides[0][0], sides[1][0])
        at = sides[0][1] if len(sides) == 1 else b.select(sides[0][0], sides[0][1], sides[1][1])
        if offset is not None:
            at = b.add(at, self._index(offset))
        blocks = [self._new_block(n) for n in ("dense", "not_dense", "uniform", "gather",
                                               "loaded")]
        fast_bb, other_bb, uniform_bb, slow_bb, join_bb = blocks
        b.cbranch(inside, fast_bb, other_bb)
        b.position_at_end(fast_bb)
        vty = ir.VectorType(elem, ramp.lanes)
        fast = self._alias(b.load(self._element_ptr(ptr, start, elem), typ=vty, align=align),
                           e.buffer)
        fast_end = b.block
        b.branch(join_bb)
        b.position_at_end(other_bb)
        b.cbranch(one_side, uniform_bb, slow_bb)
        b.position_at_end(uniform_bb)
        one = self._alias(b.load(self._element_ptr(ptr, at, elem), typ=elem, align=align),
                          e.buffer)
        uniform = self._splat(one, ramp.lanes)
        uniform_end = b.block
        b.branch(join_bb)
        b.position_at_end(slow_bb)
        ends = [(fast, fast_end), (uniform, uniform_end)]
        gather_bb = slow_bb          # where the lane-by-lane load goes, if it is needed
        if align in (4, 8) and ramp.lanes >= 4:
            gather_bb = None
            if lo is not None and hi is not None:
                # an empty clamp range (lo > hi: every lane reads hi) has no lane inside
                masked_bb, gather_bb = self._new_block("masked"), self._new_block("gather")
                b.cbranch(b.icmp_signed("<=", lo_v, hi_v), masked_bb, gather_bb)
                b.position_at_end(masked_bb)
            masked = self._masked_clamped_load(ptr, first, start, ramp.lanes, lo_v, hi_v, elem,
                                               align, e.buffer)
            ends.append((masked, b.block))
            b.branch(join_bb)
        if gather_bb is not None:
            b.position_at_end(gather_bb)
            slow = self._gather(ptr, e.index, elem, align, e.buffer, index=index)
            ends.append((slow, b.block))
            b.branch(join_bb)
        b.position_at_end(join_bb)
        v = b.phi(vty)
        for value, block in ends:
            v.add_incoming(value, block)
        return v

    def _masked_clamped_load(self, ptr, first, start, lanes, lo_v, hi_v, elem, align, buffer):
        """The lanes of ``clamp(first + [0, lanes), lo, hi)`` (``lo <= hi``, lanes on both
        sides of a bound) read at ``start`` plus the lane: one masked load of the lanes
        inside (the others are not accessed), then the lanes below ``lo`` take lane
        ``lo - first``'s value and those above ``hi`` lane ``hi - first``'s, which lie in
        the vector whenever such lanes exist (stride 1, and not all lanes on one side)."""
        b = self.b
        vty, ity = ir.VectorType(elem, lanes), ir.VectorType(I64, lanes)
        lane_ids = b.add(self._splat(first, lanes), ir.Constant(ity, list(range(lanes))))
        below = None if lo_v is None else b.icmp_signed("<", lane_ids, self._splat(lo_v, lanes))
        above = None if hi_v is None else b.icmp_signed(">", lane_ids, self._splat(hi_v, lanes))
        outside = below if above is None else above if below is None else b.or_(below, above)
        inside = b.xor(outside, ir.Constant(ir.VectorType(I1, lanes), [1] * lanes))
        # no inbounds: lanes before the buffer are masked off, and the address may be too
        at = b.gep(ptr, [start], source_etype=elem)
        fn = self._intrinsic(f"llvm.masked.load.{_mangle(vty)}.p0", vty,
                             [at.type, I32, ir.VectorType(I1, lanes), vty])
        v = self._alias(b.call(fn, [at, I32(align), inside, ir.Constant(vty, ir.Undefined)]),
                        buffer)
        edges = [(side, bound) for side, bound in ((below, lo_v), (above, hi_v))
                 if side is not None]
        values = [b.extract_element(v, b.trunc(b.sub(bound, first), I32))
                  for _, bound in edges]
        for (side, _), value in zip(edges, values):
            v = b.select(side, self._splat(value, lanes), v)
        return v

    def _alias(self, instr, buffer):
        """Tag a load / store with its buffer's alias scope: distinct buffers never alias
        (the caller checks that outputs do not overlap inputs), which lets LLVM keep
        accumulators in registers across loops that also read other buffers. Its noalias
        list (the other buffers) is added when the function is done (``_finish_alias``)."""
        instr.set_metadata("alias.scope", self._scope_list(buffer))
        self.fs.tagged.append((instr, buffer))
        return instr

    def _finish_alias(self, fs):
        """Give every access tagged in function ``fs`` the noalias list of the other buffers
        that function touches. Lists of every buffer of the kernel made LLVM's alias queries
        cost as much as the rest of optimization in kernels of ~100 buffers (a deep MLP)."""
        names = frozenset(b for _, b in fs.tagged)
        lists = self.__dict__.setdefault("_noalias_lists", {})
        for instr, buffer in fs.tagged:
            key = (buffer, names)
            if key not in lists:
                others = [self._scope(n) for n in sorted(names) if n != buffer]
                lists[key] = self.module.add_metadata(others) if others else None
            if lists[key] is not None:
                instr.set_metadata("noalias", lists[key])
        fs.tagged.clear()

    def _scope(self, buffer):
        """The alias scope of ``buffer`` (made once: llvmlite hashes a node's operands,
        nested, on every ``add_metadata``)."""
        scopes = self.__dict__.setdefault("_scopes", {})
        if buffer not in scopes:
            if "__domain__" not in scopes:
                scopes["__domain__"] = self.module.add_metadata(
                    [ir.MetaDataString(self.module, "schedlang.buffers")])
            scopes[buffer] = self.module.add_metadata(
                [ir.MetaDataString(self.module, f"schedlang.buffer.{buffer}"),
                 scopes["__domain__"]])
        return scopes[buffer]

    def _scope_list(self, buffer):
        lists = self.__dict__.setdefault("_scope_lists", {})
        if buffer not in lists:
            lists[buffer] = self.module.add_metadata([self._scope(buffer)])
        return lists[buffer]

    def _element_ptr(self, base_ptr, index, elem):
        return self.b.gep(base_ptr, [index], inbounds=True, source_etype=elem)

    def _index(self, e):
        """An index expression as i64 (scalar or vector)."""
        return self._as_i64(self.expr(e), e.dtype)

    def _as_i64(self, value, dt: DType):
        ty = value.type
        target = ir.VectorType(I64, ty.count) if isinstance(ty, ir.VectorType) else I64
        width = (ty.element if isinstance(ty, ir.VectorType) else ty).width
        if width == 64:
            return value
        if dt.is_signed:
            return self.b.sext(value, target)
        return self.b.zext(value, target)

    def _from_memory(self, value, dt):
        if dt.is_bool:
            return self.b.icmp_unsigned("!=", value, self._const_like(value.type, 0))
        return value

    def _to_memory(self, value, dt):
        if dt.is_bool:
            ty = ir.VectorType(I8, dt.lanes) if dt.lanes > 1 else I8
            return self.b.zext(value, ty)
        return value

    def _is_dense_ramp(self, e) -> bool:
        """True when ``e`` is a vector of consecutive integers (a stride-1 ramp)."""
        if isinstance(e, L.Ramp):
            return _const_int(e.stride) == 1 and not e.dtype.is_float
        if isinstance(e, E.Var):
            return bool(self.dense_lets.get(e.name))
        if isinstance(e, E.BinOp) and e.op == "add":
            return ((self._is_dense_ramp(e.a) and isinstance(e.b, L.Broadcast))
                    or (self._is_dense_ramp(e.b) and isinstance(e.a, L.Broadcast)))
        return False

    def _strided_lane_ptrs(self, ptr, e, elem):
        """Per-lane element pointers for a ramp index with a constant stride (one scalar
        base plus constant offsets), else None."""
        e, offset = _split_uniform_offset(e)
        if not isinstance(e, L.Ramp) or e.dtype.is_float:
            return None
        stride = _const_int(e.stride)
        if stride is None:
            return None
        base = self._index(e.base)
        if offset is not None:
            base = self.b.add(base, self._index(offset))
        first = self._element_ptr(ptr, base, elem)
        return [self._element_ptr(first, I64(lane * stride), elem) for lane in range(e.lanes)]

    def _dense_ramp_base(self, e):
        """The first lane (i64) of a stride-1 ramp index, else None (a gather/scatter)."""
        if not self._is_dense_ramp(e):
            return None
        if isinstance(e, L.Ramp):
            return self._index(e.base)
        if isinstance(e, E.Var):
            # A let-bound ramp: its first lane, taken from the value already computed.
            return self._as_i64(self.b.extract_element(self.expr(e), I32(0)),
                                e.dtype.element())
        ramp, offset = (e.a, e.b) if self._is_dense_ramp(e.a) else (e.b, e.a)
        return self.b.add(self._dense_ramp_base(ramp), self._index(offset.value))


def _without_lane_clamps(e):
    """A prefetch index with its per-lane clamps to a uniform bound dropped: ``max(ramp(x -
    1, 1, 16), x16(0))`` (a boundary condition's clamp) becomes ``ramp(x - 1, 1, 16)``, one
    prefetch per line instead of one per lane. The unclamped lanes are the same lines or
    their neighbours, and a prefetch outside the buffer does nothing."""
    if isinstance(e, E.BinOp) and e.op in ("min", "max"):
        if isinstance(e.b, L.Broadcast):
            return _without_lane_clamps(e.a)
        if isinstance(e.a, L.Broadcast):
            return _without_lane_clamps(e.b)
    if isinstance(e, E.BinOp) and e.op == "add":
        a, b = _without_lane_clamps(e.a), _without_lane_clamps(e.b)
        if a is not e.a or b is not e.b:
            return E.BinOp("add", a, b, e.dtype)
    return e
