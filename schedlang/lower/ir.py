"""Loop IR: statements and the vector / memory expressions lowering adds to algorithm Exprs.

A lowered kernel is one ``Stmt`` tree. Loops carry their kind (serial, parallel,
vectorized, unrolled, gpu_block, gpu_thread), allocations carry a memory scope
(global, shared, local), and barriers exist from the start so GPU targets are
renderers, not a redesign. ``stmt_to_str`` prints it as pseudocode.
Example: ``For("x", Const(0, int64), n, "serial", Store("out", v, Var("x", int64)))``.
"""
from __future__ import annotations

from ..algo import expr as E
from ..deep_recursion import deep_recursion
from ..errors import CompileError
from ..algo import types as T
from ..algo.printer import expr_to_str, named_definitions, named_text, shared_names
from ..algo.expr import map_expr, substitute, walk_expr, expr_vars  # noqa: F401 (re-exported)

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "gpu_block", "gpu_thread")
MEMORY_SCOPES = ("global", "shared", "local")


# ------------------------------------------------------------------ vector / memory exprs

class Load(E.Expr):
    """Read ``buffer[index]`` (flat element index, int64; a vector index loads lanes)."""

    __slots__ = ("buffer", "index")
    children = ("index",)

    def kids(self):
        return (self.index,)

    def __init__(self, buffer: str, index, dtype):
        self.buffer, self.index = buffer, index
        self.dtype = dtype.with_lanes(index.dtype.lanes)

    def to_str(self, p):
        return f"{self.buffer}[{p(self.index)}]"


class Ramp(E.Expr):
    """The vector ``base, base + stride, ..., base + (lanes-1)*stride``."""

    __slots__ = ("base", "stride", "lanes")
    children = ("base", "stride")

    def kids(self):
        return (self.base, self.stride)

    def __init__(self, base, stride, lanes):
        self.base, self.stride, self.lanes = base, stride, lanes
        self.dtype = base.dtype.with_lanes(lanes)

    def to_str(self, p):
        return f"ramp({p(self.base)}, {p(self.stride)}, {self.lanes})"


class Broadcast(E.Expr):
    """A scalar repeated in every lane."""

    __slots__ = ("value", "lanes")
    children = ("value",)

    def kids(self):
        return (self.value,)

    def __init__(self, value, lanes):
        self.value, self.lanes = value, lanes
        self.dtype = value.dtype.with_lanes(lanes)

    def to_str(self, p):
        return f"x{self.lanes}({p(self.value)})"


class VectorReduce(E.Expr):
    """Combine the lanes of a vector with ``op`` (add, mul, min, max) into a scalar."""

    __slots__ = ("op", "value")
    children = ("value",)

    def kids(self):
        return (self.value,)

    def __init__(self, op, value):
        self.op, self.value = op, value
        self.dtype = value.dtype.element()

    def to_str(self, p):
        return f"vector_reduce_{self.op}({p(self.value)})"


# --------------------------------------------------------------------------- statements

class Stmt:
    """Base of loop IR statements. ``children`` names the Stmt fields, ``exprs`` the Expr ones."""

    # what funcs_mentioned found, kept on the node: statements are never changed in place
    # (``replace`` makes a new one, without it)
    __slots__ = ("_funcs",)
    children: tuple = ()
    exprs: tuple = ()

    def replace(self, **kw):
        # nothing changed: keep the node, and with it what funcs_mentioned cached on it (a
        # pass that rebuilds a large nest would otherwise make every later query walk it all)
        if all(getattr(self, k) is v for k, v in kw.items()):
            return self
        new = object.__new__(type(self))
        for s in type(self).__slots__:
            object.__setattr__(new, s, kw.get(s, getattr(self, s)))
        return new

    @deep_recursion(CompileError, "printing the loop IR")
    def __repr__(self):
        return stmt_to_str(self)


class For(Stmt):
    """``for var in [min, min + extent)`` of a kind in LOOP_KINDS; ``gpu_dim`` for GPU kinds;
    ``rolled``: a loop kept as a loop in the machine code (the edge copy of a specialized
    tile, which seldom runs and is not worth LLVM's unrolling time)."""

    __slots__ = ("var", "min", "extent", "kind", "body", "gpu_dim", "rolled")
    children = ("body",)
    exprs = ("min", "extent")

    def __init__(self, var: str, min, extent, kind, body, gpu_dim=0, rolled=False):
        assert kind in LOOP_KINDS, kind
        self.var, self.min, self.extent, self.kind = var, min, extent, kind
        self.body, self.gpu_dim, self.rolled = body, gpu_dim, rolled


class LetStmt(Stmt):
    """Bind ``var`` (a Var named so, of ``value.dtype``) for the body. ``in_range``: None,
    or an expression ``raw`` that ``value`` clamps (``min`` / ``max``) where the clamps are
    the identity whenever the body runs (a fused loop's recovered row): its range is then
    raw's range intersected with the clamp's, and an empty loop gives an empty range, not
    one row. Or a tuple ``(lo, hi)``: the value lies in [lo, hi] whenever the body runs,
    proven when the nest was built (a split variable whose tail stays in its region; its
    loops bounded apart overshoot a per-tile region)."""

    __slots__ = ("var", "value", "body", "in_range")
    children = ("body",)
    exprs = ("value",)

    def __init__(self, var: str, value, body, in_range=None):
        self.var, self.value, self.body, self.in_range = var, value, body, in_range


class Store(Stmt):
    """``buffer[index] = value`` (vector index stores lanes). ``streaming``: None, or a bool
    Expr saying when the store may bypass the caches (``mark_streaming_stores``)."""

    __slots__ = ("buffer", "value", "index", "streaming")
    exprs = ("value", "index")

    def __init__(self, buffer: str, value, index, streaming=None):
        self.buffer, self.value, self.index = buffer, value, index
        self.streaming = streaming


class Allocate(Stmt):
    """Storage for ``buffer``: ``dtype`` elements, row-major ``extents``, in ``memory``."""

    __slots__ = ("buffer", "dtype", "extents", "memory", "body")
    children = ("body",)

    def __init__(self, buffer, dtype, extents, memory, body):
        assert memory in MEMORY_SCOPES, memory
        self.buffer, self.dtype, self.extents = buffer, dtype, tuple(extents)
        self.memory, self.body = memory, body


class IfThenElse(Stmt):
    __slots__ = ("cond", "then", "else_")
    children = ("then", "else_")
    exprs = ("cond",)

    def __init__(self, cond, then, else_=None):
        self.cond, self.then, self.else_ = cond, then, else_


class Block(Stmt):
    __slots__ = ("stmts",)

    def __init__(self, stmts):
        self.stmts = tuple(stmts)


class Evaluate(Stmt):
    __slots__ = ("value",)
    exprs = ("value",)

    def __init__(self, value):
        self.value = value


class Barrier(Stmt):
    """Synchronise the threads of a GPU block (``memory``: the scope made visible)."""

    __slots__ = ("memory",)

    def __init__(self, memory="shared"):
        self.memory = memory


class GpuKernel(Stmt):
    """One GPU kernel launch (made by ``gpu_kernels``): ``body`` is the nest of gpu_block
    loops (their extents are the grid, evaluated by the host), inside which every
    gpu_thread loop nest is a *phase* that all threads of a block run between barriers.
    ``threads``: the block's (x, y, z) thread counts, the largest extent of each thread
    dimension over the phases. ``name``: the kernel's symbol."""

    __slots__ = ("name", "body", "threads")
    children = ("body",)

    def __init__(self, name, body, threads):
        self.name, self.body, self.threads = name, body, tuple(threads)


class Assert(Stmt):
    """If ``cond`` is false the kernel stops and returns ``code`` (see ERROR_CODES)."""

    __slots__ = ("cond", "code")
    exprs = ("cond",)

    def __init__(self, cond, code: int):
        self.cond, self.code = cond, code


class TensorOperand:
    """One operand tile of a TensorOp: ``buffer`` elements of ``dtype`` at flat index
    ``base + lane * strides[0] + step * strides[1]`` (element strides; 0 broadcasts)."""

    __slots__ = ("buffer", "dtype", "base", "strides")

    def __init__(self, buffer, dtype, base, strides):
        self.buffer, self.dtype, self.base, self.strides = buffer, dtype, base, tuple(strides)

    def with_base(self, base):
        return TensorOperand(self.buffer, self.dtype, base, self.strides)

    def to_str(self):
        return f"{self.buffer}[{expr_to_str(self.base)}; strides {self.strides}]"


class TensorOp(Stmt):
    """``out[lane] += sum_step a[lane, step] * b[lane, step]`` as one hardware instruction
    (``intrinsic``, from ``schedlang.intrinsics``); made by the ``tensorize`` pass."""

    __slots__ = ("intrinsic", "out", "a", "b")

    def __init__(self, intrinsic, out, a, b):
        self.intrinsic, self.out, self.a, self.b = intrinsic, out, a, b

    @property
    def operands(self):
        return (self.out, self.a, self.b)


class Realize(Stmt):
    """Before storage flattening: storage for Func ``func`` over ``bounds`` [(min, extent)]."""

    __slots__ = ("func", "bounds", "memory", "body")
    children = ("body",)

    def __init__(self, func, bounds, memory, body):
        self.func, self.bounds, self.memory, self.body = func, tuple(bounds), memory, body


class Provide(Stmt):
    """Before storage flattening: ``func[args] = value``."""

    __slots__ = ("func", "args", "value")

    def __init__(self, func, args, value):
        self.func, self.args, self.value = func, tuple(args), value


class Prefetch(Stmt):
    """Before storage flattening: a hint to bring ``func[args]`` toward the caches (the read
    a later iteration will make; ``prefetch`` directive). It never faults and never changes
    a result, so its index may fall outside ``func``'s region."""

    __slots__ = ("func", "args")

    def __init__(self, func, args):
        self.func, self.args = func, tuple(args)


class FlatPrefetch(Stmt):
    """``Prefetch`` after storage flattening: ``buffer[index]``; a vector index fetches the
    lines its lanes fall in."""

    __slots__ = ("buffer", "index", "elem_bytes")
    exprs = ("index",)

    def __init__(self, buffer: str, index, elem_bytes: int):
        self.buffer, self.index, self.elem_bytes = buffer, index, elem_bytes


ERROR_CODES = {1: "an index was out of bounds (SCHEDLANG_DEBUG=bounds)",
               2: "out of memory while allocating a buffer"}


def make_block(stmts):
    """A Block of the non-empty statements, flattening nested Blocks."""
    out = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Block):
            out.extend(s.stmts)
        else:
            out.append(s)
    if not out:
        return None
    return out[0] if len(out) == 1 else Block(out)


# ------------------------------------------------------------------------- traversal

def substitute_lets(e, lets, depth=8):
    """``e`` with the let-bound variables in ``lets`` (name -> value) replaced by their
    values, through lets defined from other lets up to ``depth`` levels."""
    for _ in range(depth):
        names = expr_vars(e) & set(lets)
        if not names:
            break
        e = substitute(e, {n: lets[n] for n in names})
    return e


def map_stmt(s, stmt_fn=None, expr_fn=None):
    """Rebuild a statement tree. ``stmt_fn(s)`` may return a replacement (not recursed into),
    or None to recurse; ``expr_fn(e)`` rewrites every expression field."""
    if s is None:
        return None
    if stmt_fn is not None:
        r = stmt_fn(s)
        if r is not None:
            return r
    if isinstance(s, Block):
        stmts = [map_stmt(c, stmt_fn, expr_fn) for c in s.stmts]
        if all(a is b for a, b in zip(stmts, s.stmts)):
            return s
        return make_block(stmts)
    kw = {}
    for f in s.children:
        kw[f] = map_stmt(getattr(s, f), stmt_fn, expr_fn)
    if expr_fn is not None:
        for f in s.exprs:
            kw[f] = expr_fn(getattr(s, f))
        if isinstance(s, Provide):
            kw["args"] = tuple(expr_fn(a) for a in s.args)
            kw["value"] = expr_fn(s.value)
        if isinstance(s, Prefetch):
            kw["args"] = tuple(expr_fn(a) for a in s.args)
        if isinstance(s, LetStmt) and isinstance(s.in_range, tuple):
            # the promised range is rewritten with the value (a substituted loop variable)
            r = tuple(expr_fn(b) for b in s.in_range)
            kw["in_range"] = s.in_range if all(a is b for a, b in zip(r, s.in_range)) else r
        if isinstance(s, Realize):
            kw["bounds"] = tuple((expr_fn(a), expr_fn(b)) for a, b in s.bounds)
        if isinstance(s, Allocate):
            kw["extents"] = tuple(expr_fn(a) for a in s.extents)
        if isinstance(s, TensorOp):
            for f in ("out", "a", "b"):
                kw[f] = getattr(s, f).with_base(expr_fn(getattr(s, f).base))
    return s.replace(**kw)


def child_stmts(s):
    """The statements directly inside ``s`` (a Block's list, or its Stmt fields; some may
    be None)."""
    return s.stmts if isinstance(s, Block) else [getattr(s, f) for f in s.children]


def walk_stmt(s, fn):
    """Call ``fn`` on every statement (pre-order)."""
    if s is None:
        return
    fn(s)
    for c in child_stmts(s):
        walk_stmt(c, fn)


def reads_memory(e) -> bool:
    """Whether expression ``e`` loads from a buffer anywhere inside."""
    found = []
    walk_expr(e, lambda n: found.append(n) if not found and isinstance(n, Load) else None)
    return bool(found)


def bound_vars(s) -> set:
    """The variables the loops and lets of statement ``s`` (itself included) bind."""
    names = set()
    walk_stmt(s, lambda n: names.add(n.var) if isinstance(n, (For, LetStmt)) else None)
    return names


def path_to(root, target):
    """The statements from ``root`` down to ``target`` (not included), outermost first, or
    None when ``target`` is not inside ``root``."""
    if root is None:
        return None
    if root is target:
        return []
    for c in child_stmts(root):
        p = path_to(c, target)
        if p is not None:
            return [root] + p
    return None


def stored_buffers(s) -> set:
    """The names of the buffers statement ``s`` stores to, anywhere inside."""
    out = set()
    walk_stmt(s, lambda n: out.add(n.buffer) if isinstance(n, Store) else None)
    return out


def loaded_buffers(s) -> set:
    """The names of the buffers statement ``s`` loads from, anywhere inside."""
    out = set()

    def fn(n):
        for e in stmt_exprs(n):
            walk_expr(e, lambda m: out.add(m.buffer) if isinstance(m, Load) else None)
    walk_stmt(s, fn)
    return out


def funcs_mentioned(s) -> frozenset:
    """The ids of the Funcs that statement ``s`` reads, writes or realizes anywhere inside.
    Cached on each node, so that a pass asking about one Func after another can skip the
    parts of a large loop nest that do not touch it in constant time.
    Example: ``id(f) in funcs_mentioned(loop)``."""
    try:
        return s._funcs
    except AttributeError:
        pass
    found = set()
    for e in stmt_exprs(s):
        walk_expr(e, lambda n: found.add(id(n.func)) if isinstance(n, E.FuncRef) else None)
    if isinstance(s, (Provide, Realize)):
        found.add(id(s.func))
    for c in child_stmts(s):
        if c is not None:
            found |= funcs_mentioned(c)
    s._funcs = frozenset(found)
    return s._funcs


def stmt_exprs(s):
    """The expressions held directly by one statement."""
    out = [getattr(s, f) for f in s.exprs]
    if isinstance(s, Provide):
        out += list(s.args) + [s.value]
    if isinstance(s, Prefetch):
        out += list(s.args)
    if isinstance(s, Realize):
        out += [x for b in s.bounds for x in b]
    if isinstance(s, Allocate):
        out += list(s.extents)
    if isinstance(s, TensorOp):
        out += [op.base for op in s.operands]
    if isinstance(s, Store):
        out.append(s.streaming)
    return [x for x in out if x is not None]


# --------------------------------------------------------------------------- printing

def stmt_to_str(s, indent=0) -> str:
    """Pseudocode for a statement tree (what ``kern.loop_ir`` shows)."""
    pad = "  " * indent
    p = expr_to_str
    if s is None:
        return ""
    if isinstance(s, Block):
        return "".join(stmt_to_str(c, indent) for c in s.stmts)
    own = [getattr(s, f) for f in s.exprs] + list(getattr(s, "args", None) or ())
    names = shared_names([e for e in own if isinstance(e, E.Expr)])
    if names:
        # sub-expressions this statement shares, printed once each (a DAG as a tree
        # grows exponentially with its depth)
        lets = "".join(f"{pad}let {name} = {text}\n" for name, text in named_definitions(names))
        return lets + _stmt_line(s, indent, lambda x: named_text(x, names))
    return _stmt_line(s, indent, p)


def _stmt_line(s, indent, p):
    """``stmt_to_str`` of a statement other than a Block, its expressions printed by ``p``."""
    pad = "  " * indent
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else (
            f"{s.kind}.{'xyz'[s.gpu_dim]} " if s.kind.startswith("gpu") else s.kind + " ")
        from .simplify import simplify  # late: simplify builds on this module
        hi = p(simplify(s.min + s.extent)) if not _is_zero(s.min) else p(s.extent)
        rng = f"[{p(s.min)}, {hi})"
        return f"{pad}{kind}for {s.var} in {rng}:\n" + stmt_to_str(s.body, indent + 1)
    if isinstance(s, LetStmt):
        return f"{pad}let {s.var} = {p(s.value)}\n" + stmt_to_str(s.body, indent)
    if isinstance(s, Store):
        how = "" if s.streaming is None else f"  # streaming when {p(s.streaming)}"
        return f"{pad}{s.buffer}[{p(s.index)}] = {p(s.value)}{how}\n"
    if isinstance(s, Provide):
        return f"{pad}{s.func.name}[{', '.join(p(a) for a in s.args)}] = {p(s.value)}\n"
    if isinstance(s, Prefetch):
        return f"{pad}prefetch {s.func.name}[{', '.join(p(a) for a in s.args)}]\n"
    if isinstance(s, FlatPrefetch):
        return f"{pad}prefetch {s.buffer}[{p(s.index)}]\n"
    if isinstance(s, Allocate):
        dims = " x ".join(p(x) for x in s.extents) or "1"
        return (f"{pad}allocate {s.buffer}[{s.dtype.name}; {dims}] in {s.memory}\n"
                + stmt_to_str(s.body, indent))
    if isinstance(s, Realize):
        dims = ", ".join(f"[{p(a)}, {p(a + b) if not _is_zero(a) else p(b)})" for a, b in s.bounds)
        return f"{pad}realize {s.func.name}({dims}) in {s.memory}\n" + stmt_to_str(s.body, indent)
    if isinstance(s, IfThenElse):
        out = f"{pad}if {p(s.cond)}:\n" + stmt_to_str(s.then, indent + 1)
        if s.else_ is not None:
            out += f"{pad}else:\n" + stmt_to_str(s.else_, indent + 1)
        return out
    if isinstance(s, Evaluate):
        return f"{pad}{p(s.value)}\n"
    if isinstance(s, Barrier):
        return f"{pad}barrier({s.memory})\n"
    if isinstance(s, TensorOp):
        return (f"{pad}{s.out.to_str()} = {s.intrinsic.name}({s.out.to_str()}, {s.a.to_str()}, "
                f"{s.b.to_str()})\n")
    if isinstance(s, GpuKernel):
        tx, ty, tz = s.threads
        return (f"{pad}gpu kernel {s.name} (threads {tx} x {ty} x {tz}):\n"
                + stmt_to_str(s.body, indent + 1))
    if isinstance(s, Assert):
        return f"{pad}assert {p(s.cond)}  # else error {s.code}\n"
    return f"{pad}<{type(s).__name__}>\n"


def _is_zero(e):
    return isinstance(e, E.Const) and e.value == 0


def i64(v):
    """An int64 constant."""
    return E.Const(v, T.int64)


def as_int64(e):
    """``e`` as an int64 expression (sizes and flat indices are computed in int64)."""
    return e if e.dtype.element() == T.int64 else E.Cast(T.int64, e)


def i32(v):
    return E.Const(v, T.int32)


class KernelArg:
    """One argument of a compiled kernel: a ``"buffer"`` (pointer to ``dtype`` elements) or a
    ``"scalar"`` (a size or a Param). Kernels take them in this order in a uint64 array."""

    __slots__ = ("name", "kind", "dtype")

    def __init__(self, name: str, kind: str, dtype):
        assert kind in ("buffer", "scalar")
        self.name, self.kind, self.dtype = name, kind, dtype

    def __repr__(self):
        return f"KernelArg({self.name!r}, {self.kind!r}, {self.dtype})"
