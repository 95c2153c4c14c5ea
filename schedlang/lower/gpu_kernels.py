"""Pass (GPU targets only): GPU kernel extraction. Every nest of ``gpu_block`` loops becomes
a ``GpuKernel`` launched by the host; statements outside any such nest that store
something run as a one-block, one-thread kernel. Inside a block the schedule's
``gpu_thread`` loop nests are *phases*: all threads of the block run one phase, meet at a
barrier, then run the next, exactly as the loop IR orders them, so a Func computed at a
block-level loop (a ``cache_read(..., memory="shared")``) is complete before its
consumer's threads read it. Storage takes the scope its position allows: outside every
kernel global device memory, at block level shared memory, inside a phase per-thread
local memory; the last two need a size known when compiling.

Example: ``gpu_block.x for b: [gpu_thread.x for t: S[t] = A[b*64 + t]]; [gpu_thread.x for
t: C[...] = S[63 - t]]`` becomes one kernel of 64 threads with a barrier between the two
phases.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from ..errors import CompileError
from . import ir
from .interval import Interval, Scope, bounds_of, constant_upper_bound
from .simplify import const_value, simplify

GPU_TARGETS = ("cuda", "hip", "metal")
MAX_BLOCK_THREADS = 1024
MAX_THREADS_PER_DIM = (1024, 1024, 64)
# shared memory a block may use without opting in to more (48 KiB on every CUDA GPU;
# HIP's LDS and Metal's threadgroup memory are at least 32 KiB, checked by their runtimes)
MAX_SHARED_BYTES = 48 * 1024
MAX_LOCAL_BYTES = 16 * 1024


def is_gpu_target(target) -> bool:
    """True for ``cuda[:sm_XX]``, ``hip[:gfxNNN]`` and ``metal``."""
    return isinstance(target, str) and target.split(":", 1)[0] in GPU_TARGETS


def gpu_kernels(stmt, ctx):
    """The pass: host statements around ``GpuKernel`` launches (the identity for CPU
    targets)."""
    if not is_gpu_target(ctx.target):
        return stmt
    return _Host(ctx).stmt(stmt)


def emulation_stmt(stmt):
    """``stmt`` as a CPU runs it: GPU loops serial, barriers dropped, kernels inlined. The
    phases of a block run one after the other, so this computes what the GPU computes; it
    is how GPU schedules are checked on a machine without a GPU.
    Example: ``compile_llvm(emulation_stmt(stmt), args, name, "llvm")``."""
    def fn(s):
        if isinstance(s, ir.GpuKernel):
            return ir.map_stmt(s.body, fn)
        if isinstance(s, ir.Barrier):
            return ir.Evaluate(E.Const(0, T.int32))
        if isinstance(s, ir.For) and s.kind in ("gpu_block", "gpu_thread"):
            return ir.For(s.var, s.min, s.extent, "serial", ir.map_stmt(s.body, fn))
        if isinstance(s, ir.Allocate) and s.memory == "shared":
            return ir.Allocate(s.buffer, s.dtype, s.extents, "global", ir.map_stmt(s.body, fn))
        return None
    return ir.map_stmt(stmt, fn)


def _has(s, pred):
    found = []

    def fn(n):
        if not found and pred(n):
            found.append(n)
    ir.walk_stmt(s, fn)
    return bool(found)


def _is_loop(kind):
    return lambda n: isinstance(n, ir.For) and n.kind == kind


class _Host:
    """Walks the statements the host runs; each GPU nest it meets becomes a kernel."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.count = 0
        self.scope = Scope()          # host loop variables and their ranges
        self.lets = {}

    def loop_name(self, var):
        stage, dim = self.ctx.loop_names.get(var, (None, var))
        return f"{dim} of {stage}" if stage else dim

    def stmt(self, s):
        if s is None:
            return None
        if isinstance(s, ir.Block):
            return ir.make_block([self.stmt(c) for c in s.stmts])
        if not _has(s, _is_loop("gpu_block")):
            if _has(s, lambda n: isinstance(n, (ir.Store, ir.TensorOp, ir.Assert))):
                return self.kernel(s)
            return s
        if isinstance(s, ir.For) and s.kind == "gpu_block":
            return self.kernel(s)
        if isinstance(s, ir.LetStmt) and not ir.reads_memory(s.value):
            self.lets[s.var] = s.value
            body = self.stmt(s.body)
            del self.lets[s.var]
            return s.replace(body=body)
        if isinstance(s, ir.For) and s.kind in ("serial", "unrolled", "vectorized", "parallel"):
            self.scope.push(s.var, Interval(s.min, simplify(s.min + s.extent - 1)))
            body = self.stmt(s.body)
            self.scope.pop(s.var)
            return ir.For(s.var, s.min, s.extent, "serial", body)
        if isinstance(s, ir.IfThenElse) and not ir.reads_memory(s.cond):
            return s.replace(then=self.stmt(s.then), else_=self.stmt(s.else_))
        if isinstance(s, ir.Allocate):
            return ir.Allocate(s.buffer, s.dtype, s.extents, "global", self.stmt(s.body))
        # a statement the host cannot run that holds a kernel (a let read from memory
        # around one): the whole of it runs as one block
        return self.kernel(s)

    def kernel(self, s):
        """``s`` as one GpuKernel: its gpu_block loops are the grid."""
        chain, inner, lets = [], s, {}
        while True:
            if isinstance(inner, ir.For) and inner.kind == "gpu_block":
                chain.append(inner)
                inner = inner.body
            elif isinstance(inner, ir.LetStmt) and _has(inner.body, _is_loop("gpu_block")):
                lets[inner.var] = inner.value
                inner = inner.body
            else:
                break
        # the host sizes the grid before any block runs: no extent may depend on a block
        # index, directly or through a let between the block loops
        per_block = {loop.var: loop.var for loop in chain}
        for name, value in lets.items():
            hit = next((per_block[v] for v in E.expr_vars(value) if v in per_block), None)
            if hit is not None:
                per_block[name] = hit
        for loop in chain:
            hit = next((per_block[v] for v in E.expr_vars(loop.extent) if v in per_block), None)
            if hit is not None:
                raise CompileError(
                    f"the gpu_blocks loop {self.loop_name(loop.var)} has an extent that "
                    f"depends on the gpu_blocks loop {self.loop_name(hit)}: a grid is a box; "
                    "bind loops of fixed extents (split by a constant first)")
        nested = []
        ir.walk_stmt(inner, lambda n: nested.append(n) if _is_loop("gpu_block")(n) else None)
        if nested:
            outer = self.loop_name(chain[-1].var) if chain else None
            where = f"inside the gpu_blocks loop {outer} but not directly" if outer else \
                "where the host runs it"
            raise CompileError(
                f"the gpu_blocks loop {self.loop_name(nested[0].var)} is {where}: the block "
                "loops of one kernel must be nested in one another with nothing else between "
                "them; reorder so they are outermost, or compute this stage at the gpu_blocks "
                "loop and bind its own loops with gpu_threads")
        block = _Block(self, [(lp.var, lp) for lp in chain], lets)
        body = block.body(inner)
        for threads in block.cooperative:
            self.check_every_thread_runs(threads, block.threads)
        # rebuild the chain around the new block body
        body = _rebuild(s, inner, body)
        self.count += 1
        return ir.GpuKernel(f"kernel{self.count - 1}", body, block.threads)

    def check_every_thread_runs(self, chain, threads):
        """A phase whose threads fill shared memory together meets at barriers, which every
        thread of the block must reach: its thread loops must span the whole block."""
        extents = [1, 1, 1]
        for loop in chain:
            c = const_value(simplify(loop.extent))
            extents[loop.gpu_dim] = c if c is not None else -1
        if extents != list(threads):
            names = ", ".join(f"{self.loop_name(x.var)} ({_shown(x.extent)})" for x in chain)
            raise CompileError(
                f"the gpu_threads loops {names} wait at barriers for the threads filling "
                f"shared memory inside them, so they must span the whole block of "
                f"{' x '.join(map(str, threads))} threads; split them by factors that give "
                "that many threads, with no tail (or make the fill use as many threads)")


def _all_stmts(s):
    out = []
    ir.walk_stmt(s, out.append)
    return out


def _free_vars(s):
    """The variables statement ``s`` uses that it does not bind."""
    used = set()
    for n in _all_stmts(s):
        for e in ir.stmt_exprs(n):
            used |= E.expr_vars(e)
    return used - ir.bound_vars(s)


def _outer_buffers(phase, nest):
    """Buffers that are not allocated between the phase's root and ``nest`` (a nested fill
    may store only into the shared memory allocated around it, inside the phase)."""
    inside = {n.buffer for n in _path(phase, nest) if isinstance(n, ir.Allocate)
              and n.memory == "shared"}
    return ir.stored_buffers(nest) - inside


def _path(root, target):
    return ir.path_to(root, target) or []


def _without_last_barrier(s):
    """``s`` less the barrier it ends with (the kernel's end needs none), looking through
    the lets and allocations around its last statement."""
    if isinstance(s, ir.Barrier):
        return None
    if isinstance(s, ir.Block):
        return ir.make_block(list(s.stmts[:-1]) + [_without_last_barrier(s.stmts[-1])])
    if isinstance(s, (ir.LetStmt, ir.Allocate)):
        return s.replace(body=_without_last_barrier(s.body))
    return s


def _one_barrier_in_a_row(s):
    """``s`` with a barrier that directly follows another dropped: two fills in a row
    (a GEMM's slices of A and B) each wait before and after, and the second wait before
    is the first one's wait after."""
    def fn(n):
        if not isinstance(n, ir.Block):
            return None
        out = []
        for c in n.stmts:
            c = ir.map_stmt(c, fn)
            for x in c.stmts if isinstance(c, ir.Block) else [c]:
                if out and isinstance(out[-1], ir.Barrier):
                    x = _without_first_barrier(x)
                if x is not None:
                    out.append(x)
        return ir.make_block(out)
    return ir.map_stmt(s, fn)


def _without_first_barrier(s):
    """``s`` less the barrier it starts with, looking through the lets and allocations
    around its first statement (shared storage is declared for the whole kernel)."""
    if isinstance(s, ir.Barrier):
        return None
    if isinstance(s, ir.Block):
        return ir.make_block([_without_first_barrier(s.stmts[0])] + list(s.stmts[1:]))
    if isinstance(s, (ir.LetStmt, ir.Allocate)) and s.body is not None:
        body = _without_first_barrier(s.body)
        return s.replace(body=body) if body is not None else None
    return s


def _rebuild(s, inner, new_inner):
    """``s`` with its sub-statement ``inner`` (reached through the block chain) replaced."""
    if s is inner:
        return new_inner
    return s.replace(body=_rebuild(s.body, inner, new_inner))


class _Block:
    """The statements one block runs: phases of threads, barriers between them."""

    def __init__(self, host, chain, lets):
        self.host = host
        self.threads = [1, 1, 1]
        self.cooperative = []     # the thread-loop chains of phases with nested fills
        self.scope = Scope()
        for name, iv in host.scope.vars.items():
            self.scope.vars[name] = list(iv)
        for var, loop in chain:
            self.scope.push(var, Interval(loop.min, simplify(loop.min + loop.extent - 1)))
        self.lets = {**host.lets, **lets}

    def body(self, s):
        return _without_last_barrier(self.stmt(s)[0])

    def stmt(self, s):
        """(the statement with barriers, whether it holds a phase)."""
        if s is None:
            return None, False
        if isinstance(s, ir.For) and s.kind == "gpu_thread":
            return ir.make_block([self.phase(s), ir.Barrier("shared")]), True
        if not _has(s, _is_loop("gpu_thread")):
            if _has(s, lambda n: isinstance(n, (ir.Store, ir.TensorOp, ir.Assert,
                                                ir.Evaluate))):
                single = ir.For(f"{self.host.count}.single", ir.i64(0), ir.i64(1), "gpu_thread",
                                s, 0)
                return ir.make_block([self.phase(single), ir.Barrier("shared")]), True
            return s, False
        if isinstance(s, ir.Block):
            outs, any_phase = [], False
            for c in s.stmts:
                o, p = self.stmt(c)
                outs.append(o)
                any_phase |= p
            return ir.make_block(outs), any_phase
        if isinstance(s, ir.LetStmt):
            self.lets[s.var] = s.value
            body, p = self.stmt(s.body)
            del self.lets[s.var]
            return s.replace(body=body), p
        if isinstance(s, ir.For):
            self.scope.push(s.var, Interval(s.min, simplify(s.min + s.extent - 1)))
            body, p = self.stmt(s.body)
            self.scope.pop(s.var)
            kind = "serial" if s.kind == "parallel" else s.kind
            return ir.For(s.var, s.min, s.extent, kind, body), p
        if isinstance(s, ir.IfThenElse):
            then, p1 = self.stmt(s.then)
            else_, p2 = self.stmt(s.else_)
            return s.replace(then=then, else_=else_), p1 or p2
        if isinstance(s, ir.Allocate):
            body, p = self.stmt(s.body)
            count = self.fixed_size(s, "shared", MAX_SHARED_BYTES)
            return ir.Allocate(s.buffer, s.dtype, [ir.i64(count)], "shared", body), p
        raise CompileError(f"a {type(s).__name__} statement around gpu_threads loops cannot "
                           "run on the GPU; this is a schedlang bug, please report it")

    def phase(self, s):
        """Check one phase, widen the block's thread counts to hold it, and give its
        per-thread storage a fixed size; returns the phase. A gpu_threads nest inside the
        phase's own thread loops (under a serial loop: a shared-memory stage) is filled by
        the block's threads together, between barriers (``_cooperative``)."""
        sizes = {}
        chain, n = [], s
        while isinstance(n, (ir.For, ir.LetStmt)):
            if isinstance(n, ir.For):
                if n.kind != "gpu_thread":
                    break
                chain.append(n)
            n = n.body
        chain_ids = {id(x) for x in chain}
        chain_vars = {x.var for x in chain}
        nested = []

        def widen(loop):
            ext = self.upper_bound(loop.extent, f"the gpu_threads loop "
                                   f"{self.host.loop_name(loop.var)}")
            self.threads[loop.gpu_dim] = max(self.threads[loop.gpu_dim], ext)

        def walk(n, allocs, inside_nest):
            if n is None:
                return
            if isinstance(n, ir.For):
                if n.kind == "gpu_thread":
                    if id(n) not in chain_ids and not inside_nest:
                        self.check_cooperative(n, s, chain, chain_vars, allocs)
                        nested.append(n)
                        inside_nest = True
                    widen(n)
                self.scope.push(n.var, Interval(n.min, simplify(n.min + n.extent - 1)))
                walk(n.body, allocs, inside_nest)
                self.scope.pop(n.var)
                return
            if isinstance(n, ir.LetStmt):
                self.lets[n.var] = n.value
                walk(n.body, allocs, inside_nest)
                del self.lets[n.var]
                return
            if isinstance(n, ir.Allocate):
                filled = _has(n.body, lambda m: _is_loop("gpu_thread")(m) and id(m) not in
                              chain_ids and n.buffer in ir.stored_buffers(m))
                if n.memory == "shared" and not filled:
                    raise CompileError(
                        f"{n.buffer} is staged in shared memory at a loop inside the "
                        "gpu_threads loops, where each thread would fill its own copy; "
                        "bind its loops with gpu_threads (the block's threads then fill it "
                        "together), compute_at a loop outside the gpu_threads loops, or use "
                        "memory='local'")
                if filled:
                    count = self.fixed_size(n, "shared", MAX_SHARED_BYTES)
                    sizes[id(n)] = (count, "shared")
                else:
                    sizes[id(n)] = (self.fixed_size(n, "local", MAX_LOCAL_BYTES), "local")
                walk(n.body, allocs + ([] if filled else [n.buffer]), inside_nest)
                return
            for c in ir.child_stmts(n):
                walk(c, allocs, inside_nest)
        walk(s, [], False)
        if nested:
            self.cooperative.append(chain)
        total = self.threads[0] * self.threads[1] * self.threads[2]
        for d in range(3):
            if self.threads[d] > MAX_THREADS_PER_DIM[d]:
                raise CompileError(f"{self.threads[d]} threads along {'xyz'[d]} in one block; "
                                   f"a GPU block holds at most {MAX_THREADS_PER_DIM[d]} there: "
                                   "split the gpu_threads loop by a smaller factor")
        if total > MAX_BLOCK_THREADS:
            raise CompileError(f"a block of {' x '.join(map(str, self.threads))} = {total} "
                               f"threads; a GPU block holds at most {MAX_BLOCK_THREADS}: "
                               "split the gpu_threads loops by smaller factors")

        nested_ids = {id(x) for x in nested}

        def sized(n):
            if isinstance(n, ir.Allocate) and id(n) in sizes:
                count, memory = sizes[id(n)]
                return ir.Allocate(n.buffer, n.dtype, [ir.i64(count)], memory,
                                   ir.map_stmt(n.body, sized))
            if id(n) in nested_ids:
                # the threads wait for the last readers before refilling, and for the fill
                # before reading
                return ir.Block([ir.Barrier("shared"), n, ir.Barrier("shared")])
            return None
        return _one_barrier_in_a_row(ir.map_stmt(s, sized))

    def check_cooperative(self, nest, phase, chain, chain_vars, allocs):
        """Refuse a gpu_threads ``nest`` inside the phase's thread loops ``chain`` that the
        block's threads cannot run together: one that depends on the chain's variables,
        stores outside the shared memory it fills, reads what the phase's threads write, or
        sits under a loop or condition that differs between threads (a barrier needs all)."""
        name = self.host.loop_name(nest.var)
        outer = ", ".join(self.host.loop_name(x.var) for x in chain)
        stage = self.host.ctx.loop_names.get(nest.var, (None,))[0]
        if stage is not None and any(self.host.ctx.loop_names.get(x.var, (None,))[0] == stage
                                     for x in chain):
            # one stage's own thread loops with a serial loop between them
            def dim(v):
                return self.host.ctx.loop_names.get(v, (None, v))[1]
            between = ", ".join(dim(n.var) for n in _path(chain[-1], nest)
                                if isinstance(n, ir.For) and n is not chain[-1])
            threads = ", ".join([dim(x.var) for x in chain] + [dim(nest.var)])
            raise CompileError(
                f"the gpu_threads loops {threads} of {stage} have the loop {between} "
                f"between them; a stage's thread loops must be adjacent: reorder {stage} "
                f"so that {between} is outside or inside all of them")
        used = set()
        for v in _free_vars(nest):
            # through the lets it reads: a region min that depends on a thread's index
            used |= E.expr_vars(ir.substitute_lets(E.Var(v, T.int64), self.lets)) | {v}
        used &= chain_vars
        if used:
            raise CompileError(
                f"the gpu_threads loop {name} runs inside the gpu_threads loops {outer} and "
                f"depends on {self.host.loop_name(sorted(used)[0])}; the block's threads can "
                "run a nested thread loop together only when it is the same for every "
                "thread (a stage filling shared memory): compute it at a loop outside the "
                "gpu_threads loops, or leave its loops serial")
        written_here = ir.stored_buffers(phase) - ir.stored_buffers(nest)
        if ir.stored_buffers(nest) & (set(allocs) | _outer_buffers(phase, nest)) or \
                ir.loaded_buffers(nest) & written_here:
            raise CompileError(
                f"the gpu_threads loop {name} runs inside the gpu_threads loops {outer} but "
                "writes storage other than the shared memory it fills, or reads what those "
                "threads write; only a shared-memory stage (cache_read(..., memory='shared') "
                "computed at a loop inside the thread loops) can be filled there")
        path = _path(phase, nest)
        for n in path:
            exprs = [n.min, n.extent] if isinstance(n, ir.For) else \
                [n.cond] if isinstance(n, ir.IfThenElse) else []
            if any(E.expr_vars(e) & chain_vars for e in exprs):
                raise CompileError(
                    f"the gpu_threads loop {name} runs inside the gpu_threads loops {outer} "
                    "under a loop or condition that differs between their threads, so not "
                    "every thread would reach its barriers; make the loops around it the "
                    "same for every thread (split by constant factors)")

    def upper_bound(self, e, what):
        """The largest value of ``e`` in this block, which must be a compile-time constant."""
        e = simplify(ir.substitute_lets(e, self.lets))
        best = self.const_hi(e)
        if best is None:
            best = self.assumed_hi(e)
        if best is None:
            best = self.proved_hi(e)
        if best is None:
            raise CompileError(f"{what} has extent {_shown(e)}, which has no upper bound "
                               "known when compiling; a GPU needs fixed block and storage "
                               "sizes: split by a constant factor, or bound(...) the loop")
        return max(int(best), 1)

    def assumed_hi(self, e):
        """The least constant of the user's facts (``s.assume(W <= 64)``) that bounds ``e``
        in this block, or None."""
        from .prove import prove
        facts = list(self.host.ctx.user_facts)
        hi = bounds_of(e, self.scope).hi
        if hi is None or not facts:
            return None
        found = set()
        for f in facts:
            E.walk_expr(f, lambda n: found.add(n.value) if isinstance(n, E.Const) and
                        isinstance(n.value, int) and not isinstance(n.value, bool) else None)
        for c in sorted(found | {c - 1 for c in found}):
            if c > 0 and prove(E.binary("le", hi, E.Const(c, hi.dtype)), self.host.ctx.facts):
                return c
        return None

    def proved_hi(self, e):
        """The least of a few candidate constants (those in ``e``, one more, powers of two
        up to 4096) that ``e`` provably never exceeds in this block, with every enclosing
        loop in its range, or None. Interval arithmetic loses what a clamped tile's extent
        keeps: ``min(max(min(t*8 + 7, M - 1), 0), M - 1) - min(t*8, M - 1) + 1`` is at
        most 8 (a tile of an input read through sl.clamp_edge)."""
        from .prove import prove
        consts = set()
        E.walk_expr(e, lambda n: consts.add(n.value) if isinstance(n, E.Const) and
                    isinstance(n.value, int) and not isinstance(n.value, bool) else None)
        candidates = sorted({c for c in consts | {c + 1 for c in consts} if 0 < c <= 4096}
                            | {1 << k for k in range(13)})
        facts = list(self.host.ctx.facts)
        for name, ivs in self.scope.vars.items():
            iv = ivs[-1]
            var = E.Var(name, iv.lo.dtype if iv.lo is not None else T.int64)
            if iv.lo is not None:
                facts.append(E.binary("ge", var, iv.lo))
            if iv.hi is not None:
                facts.append(E.binary("le", var, iv.hi))
        for c in candidates:
            if prove(E.binary("le", e, E.Const(c, e.dtype)), facts):
                return c
        return None

    def const_hi(self, e):
        """A constant upper bound of ``e`` in this block, or None (a double-buffered
        stage's size is ``max(min(K - 1, 7), ...) + 1``)."""
        return constant_upper_bound(e, self.scope)

    def fixed_size(self, a, memory, limit):
        """Check that allocation ``a`` has a compile-time size in ``memory``."""
        count = 1
        for x in a.extents:
            count *= self.upper_bound(x, f"{a.buffer} (in {memory} memory)")
        nbytes = count * a.dtype.bytes
        if nbytes > limit:
            raise CompileError(f"{a.buffer} needs up to {nbytes} bytes of {memory} memory, "
                               f"more than the {limit} a GPU block may use: compute it at an "
                               "inner loop, or over smaller tiles")
        return count


def _shown(e):
    from .bounds_inference import user_text
    return user_text(e)
