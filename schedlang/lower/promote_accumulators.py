"""Pass: keep accumulators in registers across serial reduction loops. When a loop
reads and writes a buffer only at addresses that do not change inside it (a reduction
into C[i, j] over k), the values are loaded once into small local buffers before the
loop, updated there, and stored back after it; LLVM turns those into registers. LLVM's
own promotion does this only when it can prove enough about the whole nest.

The outermost loop that qualifies is chosen, so a multi-dimensional reduction (a conv's
channels x 3 x 3) keeps its accumulators in registers across the whole nest rather than
reloading them every few iterations. A loop qualifies only when everything inside it is
straight-line code and serial loops of constant, positive extent: a guarded access must not
be loaded or stored unconditionally around the loop.
Example: ``for k: C[i] = C[i] + A[k]`` becomes
``t = C[i]; for k: t = t + A[k]; C[i] = t``.

An accumulator whose buffer was just initialised (``C[i] = 0`` a few statements before,
nothing reading it in between) starts from that value instead: ``t = 0``, and the first
store goes, since the store after the loop overwrites it. A reduction computed in its
output (a 1x1 conv's tile of sums) then writes each output line once, not three times.
"""
from __future__ import annotations

from ..algo import expr as E
from ..algo import types as T
from . import ir
from .simplify import difference, simplify


def _lanes_index(lanes):
    zero = E.Const(0, T.int64)
    return zero if lanes == 1 else ir.Ramp(zero, E.Const(1, T.int64), lanes)


def _span(idx):
    """(base, lanes) of a scalar index or a stride-1 ramp, else None."""
    if isinstance(idx, ir.Ramp):
        if isinstance(idx.stride, E.Const) and idx.stride.value == 1:
            return idx.base, idx.lanes
        return None
    return (idx, 1) if idx.dtype.lanes == 1 else None


def _disjoint(a, b):
    (ba, la), (bb, lb) = a, b
    d = difference(ba, bb)
    return d is not None and (d >= lb or -d >= la)


def _straight_nest(body):
    """True when ``body`` holds only straight-line statements and serial loops that run a
    constant, positive number of times (so every access in it runs whenever it is entered).
    On a GPU, a block's threads filling a shared-memory buffer allocated in ``body`` (a
    gpu_threads nest that stores only there) may sit among them: it touches nothing else."""
    shared = set()
    ir.walk_stmt(body, lambda s: shared.add(s.buffer) if isinstance(s, ir.Allocate)
                 and s.memory == "shared" else None)

    def ok(s):
        if s is None:
            return True
        if isinstance(s, ir.Allocate) and s.memory == "shared":
            return ok(s.body)
        if isinstance(s, ir.For) and s.kind == "gpu_thread":
            return ir.stored_buffers(s) <= shared and not (ir.loaded_buffers(s) & (
                ir.stored_buffers(body) - shared))
        if isinstance(s, (ir.Allocate, ir.Assert, ir.IfThenElse, ir.TensorOp)):
            return False
        if isinstance(s, ir.For):
            ext = simplify(s.extent)
            if s.kind != "serial" or not (isinstance(ext, E.Const) and ext.value > 0):
                return False
        return all(ok(c) for c in ir.child_stmts(s))
    return ok(body)


class _Promoter:
    def __init__(self):
        self.count = 0
        self.temps = set()        # the local buffers this pass made; never promoted again

    def stmt(self, s):
        def fn(n):
            if not isinstance(n, ir.For):
                return None
            if n.kind == "serial":
                done = self.promote(n)
                if done is not None:
                    wrap, loop = done
                    return wrap(loop.replace(body=ir.map_stmt(loop.body, fn)))
            return n.replace(body=ir.map_stmt(n.body, fn))
        return ir.map_stmt(s, fn)

    def promote(self, loop):
        """(wrap, rewritten loop) when some buffer's accesses in ``loop`` can live in
        registers for the whole loop, else None. ``wrap(loop)`` adds the loads before, the
        stores after and the local allocations."""
        if not _straight_nest(loop.body):
            return None
        accesses = {}             # buffer -> {key: (full index, dtype, stored?)}

        def note(buf, idx, dtype, store):
            slot = accesses.setdefault(buf, {})
            k = E.structural_key(idx)
            old = slot.get(k)
            slot[k] = (idx, dtype.element(), store or (old is not None and old[2]))

        def full(e, env):
            """``e`` with the loop body's lets substituted (what it means at that point)."""
            return simplify(ir.substitute(e, env)) if env else simplify(e)

        def collect(s, env):
            if s is None:
                return
            if isinstance(s, ir.Block):
                for c in s.stmts:
                    collect(c, env)
                return
            for e in ir.stmt_exprs(s):
                E.walk_expr(e, lambda n: note(n.buffer, full(n.index, env), n.dtype, False)
                            if isinstance(n, ir.Load) and n.buffer in stored else None)
            if isinstance(s, ir.Store):
                note(s.buffer, full(s.index, env), s.value.dtype, True)
            if isinstance(s, ir.LetStmt):
                collect(s.body, {**env, s.var: full(s.value, env)})
                return
            for f in s.children:
                collect(getattr(s, f), env)
        # only a buffer the loop stores to can be promoted: the reads of the others (the
        # inputs, most of the loads) need not be resolved
        stored = ir.stored_buffers(loop.body) - self.temps
        if not stored:
            return None
        collect(loop.body, {})
        chosen = {}
        for buf, slots in accesses.items():
            if buf in self.temps or not any(st for _, _, st in slots.values()):
                continue
            spans = []
            ok = True
            for idx, _, _ in slots.values():
                sp = _span(idx)
                # invariant: after substituting the lets, only names from outside the loop
                if sp is None or loop.var in ir.expr_vars(idx) or ir.bound_vars(loop) & \
                        ir.expr_vars(idx):
                    ok = False
                    break
                spans.append(sp)
            for i in range(len(spans)):
                for j in range(i + 1, len(spans)):
                    ok = ok and _disjoint(spans[i], spans[j])
            if ok:
                chosen[buf] = slots
        if not chosen:
            return None
        temps = {}
        for buf, slots in chosen.items():
            for k, (idx, dt, _) in slots.items():
                self.count += 1
                temps[(buf, k)] = (f"{buf}.acc{self.count}", idx, dt, idx.dtype.lanes)
                self.temps.add(f"{buf}.acc{self.count}")

        def rewrite(s, env):
            def load_fn(n):
                if isinstance(n, ir.Load):
                    key = (n.buffer, E.structural_key(full(n.index, env)))
                    if key in temps:
                        name, _, dt, lanes = temps[key]
                        return ir.Load(name, _lanes_index(lanes), dt)
                return None

            def ex(e):
                return E.map_expr(e, load_fn)
            if s is None:
                return None
            if isinstance(s, ir.Block):
                return ir.make_block([rewrite(c, env) for c in s.stmts])
            if isinstance(s, ir.Store):
                key = (s.buffer, E.structural_key(full(s.index, env)))
                if key in temps:
                    name, _, _, lanes = temps[key]
                    return ir.Store(name, ex(s.value), _lanes_index(lanes))
                return ir.Store(s.buffer, ex(s.value), ex(s.index))
            if isinstance(s, ir.LetStmt):
                return ir.LetStmt(s.var, ex(s.value),
                                  rewrite(s.body, {**env, s.var: full(s.value, env)}))
            if isinstance(s, ir.Evaluate):
                return ir.Evaluate(ex(s.value))
            if isinstance(s, ir.FlatPrefetch):
                return s.replace(index=ex(s.index))
            if isinstance(s, ir.For) and s.kind == "gpu_thread":
                return s        # a shared-memory fill: it touches no accumulator
            if isinstance(s, ir.For):
                return s.replace(min=ex(s.min), extent=ex(s.extent), body=rewrite(s.body, env))
            if isinstance(s, ir.Allocate):
                return s.replace(body=rewrite(s.body, env))
            raise AssertionError(f"internal error: unexpected {type(s).__name__} in a loop body")
        pre, post = [], []
        for (buf, _), (name, idx, dt, lanes) in temps.items():
            pre.append(ir.Store(name, ir.Load(buf, idx, dt), _lanes_index(lanes)))
            post.append(ir.Store(buf, ir.Load(name, _lanes_index(lanes), dt), idx))

        def wrap(new_loop):
            out = ir.make_block(pre + [new_loop] + post)
            for (name, _, dt, lanes) in temps.values():
                out = ir.Allocate(name, dt, [E.Const(lanes, T.int64)], "local", out)
            return out
        return wrap, loop.replace(body=rewrite(loop.body, {}))


class _Let:
    """A let definition met on the way, substituted into the indexes that use it only when
    one is asked for (a deep DAG of lets is never expanded unless a store needs it)."""
    __slots__ = ("value", "env", "full")

    def __init__(self, value, env):
        self.value, self.env, self.full = value, env, None


def _full(e, env):
    """``e`` with the lets of ``env`` (name -> _Let) substituted, simplified."""
    names = ir.expr_vars(e) & env.keys() if env else ()
    if not names:
        return simplify(e)
    sub = {}
    for name in names:
        let = env[name]
        if let.full is None:
            let.full = _full(let.value, let.env)
        sub[name] = let.full
    return simplify(ir.substitute(e, sub))


def _expr_loads(e):
    """The buffers expression ``e`` reads."""
    found = set()
    E.walk_expr(e, lambda n: found.add(n.buffer) if isinstance(n, ir.Load) else None)
    return found


def _loaded(s):
    """The buffers statement ``s`` reads or writes anywhere inside."""
    found = set()

    def visit(st):
        for e in ir.stmt_exprs(st):
            found.update(_expr_loads(e))
        if isinstance(st, ir.Store):
            found.add(st.buffer)
        if isinstance(st, ir.TensorOp):
            found.update(op.buffer for op in st.operands)
    ir.walk_stmt(s, visit)
    return found


def forward_initial_values(stmt, temps):
    """Start each promoted accumulator (a store to one of ``temps`` of a load of its
    buffer) from the value stored at that address earlier in the same straight-line code,
    when nothing read or overlapped that address in between, and drop that earlier store
    (the store after the reduction loop overwrites it)."""
    drop, start = set(), {}
    # the buffers some accumulator is loaded from: only their stores matter here
    sources = set()
    ir.walk_stmt(stmt, lambda s: sources.add(s.value.buffer) if isinstance(s, ir.Store) and
                 s.buffer in temps and isinstance(s.value, ir.Load) else None)
    sources -= temps
    if not sources:
        return stmt

    def forget(pending, buffers):
        for key in [k for k in pending if k[0] in buffers]:
            del pending[key]

    # ``alone``: ``s`` sits in a Block, maybe under lets only, so that it can go
    def scan(s, env, pending, alone):
        if s is None:
            return
        if isinstance(s, ir.Block):
            for c in s.stmts:
                scan(c, env, pending, True)
        elif isinstance(s, ir.LetStmt):
            if pending:
                forget(pending, _expr_loads(s.value))
            scan(s.body, {**env, s.var: _Let(s.value, env)}, pending, alone)
        elif isinstance(s, ir.Allocate):
            scan(s.body, env, pending, False)
        elif isinstance(s, ir.Store):
            v = s.value
            if s.buffer in temps and isinstance(v, ir.Load) and v.buffer not in temps:
                hit = pending.pop((v.buffer, E.structural_key(_full(v.index, env))), None)
                if hit is not None:
                    drop.add(hit[0])
                    start[id(s)] = hit[1]
                    return
            if pending:
                forget(pending, _expr_loads(v) | _expr_loads(s.index))
            if s.buffer not in sources:
                return
            idx = _full(s.index, env)
            span = _span(idx)
            for key in [k for k in pending if k[0] == s.buffer]:
                if span is None or not _disjoint(span, pending[key][2]):
                    del pending[key]
            value = _full(v, env)
            if alone and span is not None and not _expr_loads(value):
                pending[(s.buffer, E.structural_key(idx))] = (id(s), value, span)
        else:
            # a loop or a branch: what it touches is no longer known; the code inside is
            # straight-line again on its own
            if pending:
                forget(pending, _loaded(s))
            for c in ir.child_stmts(s):
                scan(c, env, {}, False)

    scan(stmt, {}, {}, False)
    if not drop:
        return stmt

    def rebuild(s):
        # a dropped store leaves nothing; the lets around it go with it, and a Block of
        # nothing else (the reduction that reads the value always follows in the Block)
        if isinstance(s, ir.Store):
            return None if id(s) in drop else s.replace(value=start[id(s)]) \
                if id(s) in start else s
        if isinstance(s, ir.Block):
            return ir.make_block([rebuild(c) for c in s.stmts])
        if isinstance(s, ir.LetStmt):
            body = rebuild(s.body)
            return None if body is None else s.replace(body=body)
        return ir.map_stmt(s, lambda c: None if c is s else rebuild(c))
    return rebuild(stmt)


def promote_accumulators(stmt, ctx):
    if ctx.debug_bounds:
        return stmt
    promoter = _Promoter()
    return forward_initial_values(promoter.stmt(stmt), promoter.temps)
