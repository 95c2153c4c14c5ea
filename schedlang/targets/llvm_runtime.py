"""The small runtime the LLVM CPU backend emits into the modules that need it.

Everything here is generated as LLVM IR with ``llvmlite.ir`` (no C compiler, no shared
library to ship): declarations of the libc / libpthread functions the JIT resolves from the
running process, and, per outlined ``parallel`` loop body, a runner that executes it on
threads. The code generator outlines a parallel loop body into a function
``i32 body(ptr closure, i64 iteration)``; ``parallel_runner(module, body)`` emits
``i32 body.run(ptr closure, i64 extent, i32 nthreads)``, which calls the body for every
iteration in ``[0, extent)`` on ``min(nthreads, extent)`` threads (the calling thread
included), hands iterations out dynamically in small chunks through an atomic counter, and
returns the first nonzero code. The runner calls its body directly (one runner per body),
so LLVM can inline the body into it.
Example: ``rc = call i32 @"k.par0.y.run"(ptr %closure, i64 %n, i32 %nthreads)``.
"""
from __future__ import annotations

from llvmlite import ir

I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()

# The process's thread pool (``llvm_thread_pool``), which runners hand their loop to:
# i32 schedlang_parallel_run(ptr worker, ptr state, i64 helpers).
POOL_RUN = "schedlang_parallel_run"
POOL_RUN_TYPE = ir.FunctionType(I32, [PTR, PTR, I64])

# The signature of an outlined parallel loop body: i32 body(ptr closure, i64 iteration).
BODY_FN_TYPE = ir.FunctionType(I32, [PTR, I64])

# Shared state of one running parallel loop: closure, extent, next iteration to hand out,
# first error, iterations per grab.
_STATE_TYPE = ir.LiteralStructType([PTR, I64, I64, I32, I64])
_F_CLOSURE, _F_EXTENT, _F_NEXT, _F_ERROR, _F_CHUNK = range(5)
# Iterations are handed out in chunks of about extent / (threads * this), so a thread
# goes back to the shared counter about this many times: few enough to keep contention on
# the counter low, enough to balance uneven iterations.
_GRABS_PER_THREAD = 8

# C functions taken from the process. pthread_t is an unsigned long (8 bytes) on Linux.
_C_FUNCTIONS = {
    "malloc": ir.FunctionType(PTR, [I64]),
    "free": ir.FunctionType(ir.VoidType(), [PTR]),
    "posix_memalign": ir.FunctionType(I32, [PTR, I64, I64]),
    "pthread_create": ir.FunctionType(I32, [PTR, PTR, PTR, PTR]),
    "pthread_join": ir.FunctionType(I32, [I64, PTR]),
    "pthread_detach": ir.FunctionType(I32, [I64]),
    "pthread_mutex_init": ir.FunctionType(I32, [PTR, PTR]),
    "pthread_mutex_lock": ir.FunctionType(I32, [PTR]),
    "pthread_mutex_unlock": ir.FunctionType(I32, [PTR]),
    "pthread_cond_init": ir.FunctionType(I32, [PTR, PTR]),
    "pthread_cond_wait": ir.FunctionType(I32, [PTR, PTR]),
    "pthread_cond_broadcast": ir.FunctionType(I32, [PTR]),
    "sched_yield": ir.FunctionType(I32, []),
}


def declare_c_function(module: ir.Module, name: str, fnty: ir.FunctionType = None) -> ir.Function:
    """The declaration of the external C function ``name`` in ``module`` (added once).

    ``fnty`` is needed only for functions outside the built-in table (libm functions).
    """
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, fnty or _C_FUNCTIONS[name], name=name)
    fn.attributes.add("nounwind")
    return fn


def store_fence(b: ir.IRBuilder, module: ir.Module) -> None:
    """Order the streaming (non-temporal) stores made so far before any later memory
    access: ``sfence`` on x86, whose LLVM ``fence`` may become a locked instruction that
    vendors document differently for such stores; a full fence elsewhere."""
    if module.triple.startswith(("x86_64", "i686", "i386")):
        fn = module.globals.get("llvm.x86.sse.sfence") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
        b.call(fn, [])
    else:
        b.fence("seq_cst")


def _field(builder, state, index):
    return builder.gep(state, [I32(0), I32(index)], inbounds=True, source_etype=_STATE_TYPE)


def _emit_worker(module: ir.Module, body: ir.Function, fence: bool) -> ir.Function:
    """``ptr body.worker(ptr state)``: grab chunks of iterations until none are left or one
    failed. It is the pthread start routine and is also run by the calling thread. With
    ``fence`` (the body makes streaming stores, which are weakly ordered) it ends with a
    full fence, so the thread that waits for the loop sees every store.
    """
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR]), name=body.name + ".worker")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    state = fn.args[0]
    entry, take, grabbed, call, step, failed, done = (fn.append_basic_block(n) for n in (
        "entry", "take", "grabbed", "call", "step", "failed", "done"))

    b = ir.IRBuilder(entry)
    closure = b.load(_field(b, state, _F_CLOSURE), typ=PTR)
    extent = b.load(_field(b, state, _F_EXTENT), typ=I64)
    chunk = b.load(_field(b, state, _F_CHUNK), typ=I64)
    b.branch(take)

    b.position_at_end(take)
    # Stop taking work as soon as any iteration reported an error.
    err = b.load_atomic(_field(b, state, _F_ERROR), "monotonic", 4, typ=I32)
    start = b.atomic_rmw("add", _field(b, state, _F_NEXT), chunk, "monotonic")
    b.cbranch(b.or_(b.icmp_signed("!=", err, I32(0)), b.icmp_signed(">=", start, extent)),
              done, grabbed)

    b.position_at_end(grabbed)
    stop = b.add(start, chunk)
    stop = b.select(b.icmp_signed("<", stop, extent), stop, extent)
    b.branch(call)

    b.position_at_end(call)
    i = b.phi(I64, name="i")
    i.add_incoming(start, grabbed)
    rc = b.call(body, [closure, i])
    b.cbranch(b.icmp_signed("!=", rc, I32(0)), failed, step)

    b.position_at_end(step)
    nxt = b.add(i, I64(1))
    i.add_incoming(nxt, step)
    b.cbranch(b.icmp_signed("<", nxt, stop), call, take)

    b.position_at_end(failed)
    # Keep the first error only: a later one loses the exchange.
    b.cmpxchg(_field(b, state, _F_ERROR), I32(0), rc, "seq_cst", "seq_cst")
    b.branch(done)

    b.position_at_end(done)
    if fence:
        store_fence(b, module)
    b.ret(ir.Constant(PTR, None))
    return fn


def parallel_runner(module: ir.Module, body: ir.Function, fence: bool = False) -> ir.Function:
    """Emit ``i32 <body>.run(ptr closure, i64 extent, i32 nthreads)`` for an outlined body.

    With ``nthreads <= 1`` or ``extent <= 1`` it runs the iterations in order on the calling
    thread, without creating threads. Otherwise it hands the loop to the process's thread
    pool (``llvm_thread_pool``) with ``min(nthreads, extent) - 1`` helpers; when the pool
    is busy (a parallel loop inside another, or kernels running at once on several Python
    threads) it starts that many pthreads of its own and works alongside them. If a thread
    (or the array of handles) cannot be created, the threads that exist and the caller
    still do all the work, so a shortage of threads costs speed, never correctness.
    """
    worker = _emit_worker(module, body, fence)
    malloc = declare_c_function(module, "malloc")
    free = declare_c_function(module, "free")
    pthread_create = declare_c_function(module, "pthread_create")
    pthread_join = declare_c_function(module, "pthread_join")
    pool_run = declare_c_function(module, POOL_RUN, POOL_RUN_TYPE)

    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32]), name=body.name + ".run")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    closure, extent, nthreads = fn.args
    blk = {n: fn.append_basic_block(n) for n in (
        "entry", "threaded", "own_threads", "pooled", "spawn", "spawn_next", "spawned", "join", "join_body", "joined",
        "serial", "serial_body", "serial_next", "serial_done", "serial_fail")}

    b = ir.IRBuilder(blk["entry"])
    state = b.alloca(_STATE_TYPE, name="state")
    state.type = PTR  # an opaque pointer, like every other pointer in the module
    nthreads64 = b.sext(nthreads, I64)
    use_threads = b.and_(b.icmp_signed(">", nthreads64, I64(1)),
                         b.icmp_signed(">", extent, I64(1)))
    b.cbranch(use_threads, blk["threaded"], blk["serial"])

    # ---- threaded: shared state, thread handles, spawn, work alongside, join.
    b.position_at_end(blk["threaded"])
    nthr = b.select(b.icmp_signed("<", nthreads64, extent), nthreads64, extent)
    nworkers = b.sub(nthr, I64(1))
    b.store(closure, _field(b, state, _F_CLOSURE))
    b.store(extent, _field(b, state, _F_EXTENT))
    b.store(I64(0), _field(b, state, _F_NEXT))
    b.store(I32(0), _field(b, state, _F_ERROR))
    chunk = b.sdiv(extent, b.mul(nthr, I64(_GRABS_PER_THREAD)))
    b.store(b.select(b.icmp_signed("<", chunk, I64(1)), I64(1), chunk),
            _field(b, state, _F_CHUNK))
    pooled = b.call(pool_run, [worker, state, nworkers])
    b.cbranch(b.icmp_signed("!=", pooled, I32(0)), blk["pooled"], blk["own_threads"])

    b.position_at_end(blk["pooled"])
    # the pool returns after every thread that ran the worker has finished
    b.ret(b.load(_field(b, state, _F_ERROR), typ=I32))

    b.position_at_end(blk["own_threads"])
    tids = b.call(malloc, [b.mul(nworkers, I64(8))])
    b.cbranch(b.icmp_unsigned("==", tids, ir.Constant(PTR, None)), blk["serial"], blk["spawn"])

    b.position_at_end(blk["spawn"])
    k = b.phi(I64, name="k")
    k.add_incoming(I64(0), blk["own_threads"])
    b.cbranch(b.icmp_signed("<", k, nworkers), blk["spawn_next"], blk["spawned"])

    b.position_at_end(blk["spawn_next"])
    slot = b.gep(tids, [k], inbounds=True, source_etype=I64)
    rc = b.call(pthread_create, [slot, ir.Constant(PTR, None), worker, state])
    k.add_incoming(b.add(k, I64(1)), blk["spawn_next"])
    # A failed pthread_create ends spawning; the threads made so far are joined.
    b.cbranch(b.icmp_signed("==", rc, I32(0)), blk["spawn"], blk["spawned"])

    b.position_at_end(blk["spawned"])
    created = b.phi(I64, name="created")
    created.add_incoming(k, blk["spawn"])
    created.add_incoming(k, blk["spawn_next"])
    b.call(worker, [state])
    b.branch(blk["join"])

    b.position_at_end(blk["join"])
    j = b.phi(I64, name="j")
    j.add_incoming(I64(0), blk["spawned"])
    b.cbranch(b.icmp_signed("<", j, created), blk["join_body"], blk["joined"])

    b.position_at_end(blk["join_body"])
    tid = b.load(b.gep(tids, [j], inbounds=True, source_etype=I64), typ=I64)
    b.call(pthread_join, [tid, ir.Constant(PTR, None)])
    j.add_incoming(b.add(j, I64(1)), blk["join_body"])
    b.branch(blk["join"])

    b.position_at_end(blk["joined"])
    b.call(free, [tids])
    # pthread_join orders every worker's writes before this read.
    b.ret(b.load(_field(b, state, _F_ERROR), typ=I32))

    # ---- serial: the iterations in order, stopping at the first error.
    b.position_at_end(blk["serial"])
    i = b.phi(I64, name="i")
    i.add_incoming(I64(0), blk["entry"])
    i.add_incoming(I64(0), blk["own_threads"])
    b.cbranch(b.icmp_signed("<", i, extent), blk["serial_body"], blk["serial_done"])

    b.position_at_end(blk["serial_body"])
    rc = b.call(body, [closure, i])
    b.cbranch(b.icmp_signed("!=", rc, I32(0)), blk["serial_fail"], blk["serial_next"])

    b.position_at_end(blk["serial_next"])
    i.add_incoming(b.add(i, I64(1)), blk["serial_next"])
    b.branch(blk["serial"])

    b.position_at_end(blk["serial_done"])
    b.ret(I32(0))
    b.position_at_end(blk["serial_fail"])
    b.ret(rc)
    return fn


# ------------------------------------------------------------------ float16 conversions
#
# Without F16C (e.g. ``llvm:x86-64``) LLVM lowers fpext/fptrunc between half and float to
# calls of compiler-rt helpers, which are not in a Python process: the JIT would jump to a
# null address. Modules that use half therefore define those helpers themselves, in integer
# arithmetic (F. Giesen's round-to-nearest-even conversions). On CPUs with F16C the backend
# never calls them and they cost nothing but a few bytes.

F32 = ir.FloatType()
F64 = ir.DoubleType()
F16 = ir.HalfType()
I16 = ir.IntType(16)


def f32_bits_to_f16_bits(b: ir.IRBuilder, x):
    """Round float bits ``x`` (i32, scalar or vector) to half bits (i16), nearest-even.

    NaN becomes the quiet NaN 0x7e00 (with the sign), overflow becomes infinity.
    """
    ty = x.type
    c = (lambda v: ir.Constant(ty, v)) if not isinstance(ty, ir.VectorType) else (
        lambda v: ir.Constant(ty, [v] * ty.count))
    fty = F32 if not isinstance(ty, ir.VectorType) else ir.VectorType(F32, ty.count)
    sign = b.and_(x, c(0x80000000))
    f = b.xor(x, sign)
    # |x| >= 65536: infinity, or NaN when x is a NaN.
    big = b.select(b.icmp_unsigned(">", f, c(0x7F800000)), c(0x7E00), c(0x7C00))
    # |x| < 2**-14: a half subnormal; a float add of 0.5 rounds it into place.
    den = b.sub(b.bitcast(b.fadd(b.bitcast(f, fty), b.bitcast(c(0x3F000000), fty)), ty),
                c(0x3F000000))
    # Normal: rebias the exponent and round the 13 dropped bits to nearest-even.
    odd = b.and_(b.lshr(f, c(13)), c(1))
    norm = b.lshr(b.add(b.add(f, c((-(112 << 23) + 0xFFF) & 0xFFFFFFFF)), odd), c(13))
    out = b.select(b.icmp_unsigned(">=", f, c(0x47800000)), big,
                   b.select(b.icmp_unsigned("<", f, c(0x38800000)), den, norm))
    out = b.or_(out, b.lshr(sign, c(16)))
    return b.trunc(out, I16 if not isinstance(ty, ir.VectorType) else ir.VectorType(I16, ty.count))


def f16_bits_to_f32_bits(b: ir.IRBuilder, h):
    """Widen half bits ``h`` (i16, scalar) to float bits (i32); exact."""
    c = lambda v: ir.Constant(I32, v)  # noqa: E731
    h32 = b.zext(h, I32)
    o = b.shl(b.and_(h32, c(0x7FFF)), c(13))
    exp = b.and_(o, c(0x0F800000))
    o = b.add(o, c(112 << 23))
    inf_nan = b.add(o, c(112 << 23))
    den = b.bitcast(b.fsub(b.bitcast(b.add(o, c(1 << 23)), F32), b.bitcast(c(113 << 23), F32)), I32)
    o = b.select(b.icmp_unsigned("==", exp, c(0x0F800000)), inf_nan,
                 b.select(b.icmp_unsigned("==", exp, c(0)), den, o))
    return b.or_(o, b.shl(b.and_(h32, c(0x8000)), c(16)))


def f64_to_f32_round_to_odd(b: ir.IRBuilder, module: ir.Module, x):
    """Narrow a double (scalar or vector) to float rounding to odd.

    Rounding to odd first and to nearest-even after gives the correctly rounded half, where
    two nearest-even roundings in a row could round twice the same way.
    """
    vec = isinstance(x.type, ir.VectorType)
    n = x.type.count if vec else 1
    fty = ir.VectorType(F32, n) if vec else F32
    ity = ir.VectorType(I32, n) if vec else I32
    c = (lambda v: ir.Constant(ity, [v] * n)) if vec else (lambda v: ir.Constant(ity, v))
    sfx = f"v{n}f64" if vec else "f64"
    fabs = module.globals.get("llvm.fabs." + sfx) or ir.Function(
        module, ir.FunctionType(x.type, [x.type]), name="llvm.fabs." + sfx)
    t = b.fptrunc(x, fty)
    back = b.fpext(t, x.type)
    inexact = b.fcmp_unordered("!=", back, x)
    away = b.and_(inexact, b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [x])))
    return _to_odd(b, t, ity, c, inexact, away)


def _to_odd(b: ir.IRBuilder, rounded, int_type, c, inexact, away):
    """``rounded`` (a nearest-even result) turned into the round-to-odd one: where it is
    inexact, step back toward zero if it went ``away``, then set the lowest bit."""
    bits = b.bitcast(rounded, int_type)
    bits = b.select(away, b.sub(bits, c(1)), bits)
    bits = b.select(inexact, b.or_(bits, c(1)), bits)
    return b.bitcast(bits, rounded.type)


def i64_to_f64_round_to_odd(b: ir.IRBuilder, module: ir.Module, x, unsigned: bool):
    """Convert a 64-bit integer (scalar or vector) to double rounding to odd, so that a
    later rounding to a narrower float is correctly rounded (see f64_to_f32_round_to_odd)."""
    vec = isinstance(x.type, ir.VectorType)
    n = x.type.count if vec else 1
    fty = ir.VectorType(ir.DoubleType(), n) if vec else ir.DoubleType()
    c = (lambda v: ir.Constant(x.type, [v] * n)) if vec else (lambda v: ir.Constant(x.type, v))
    f = b.uitofp(x, fty) if unsigned else b.sitofp(x, fty)
    kind = "fptoui" if unsigned else "fptosi"
    sfx = (f"v{n}i64.v{n}f64" if vec else "i64.f64")
    back_fn = module.globals.get(f"llvm.{kind}.sat.{sfx}") or ir.Function(
        module, ir.FunctionType(x.type, [fty]), name=f"llvm.{kind}.sat.{sfx}")
    back = b.call(back_fn, [f])   # saturates at 2**63 / 2**64: only there is it inexact unseen
    inexact = b.icmp_unsigned("!=", back, x)
    if unsigned:
        away = b.icmp_unsigned(">", back, x)
    else:   # rounded away from zero: past x on x's side of zero
        negative = b.icmp_signed("<", x, c(0))
        away = b.select(negative, b.icmp_signed("<", back, x), b.icmp_signed(">", back, x))
    return _to_odd(b, f, x.type, c, inexact, b.and_(inexact, away))


def define_half_libcalls(module: ir.Module) -> None:
    """Define ``__truncsfhf2``, ``__extendhfsf2`` and ``__truncdfhf2`` in ``module`` (once)."""
    if module.globals.get("__truncsfhf2") is not None:
        return
    fn = ir.Function(module, ir.FunctionType(F16, [F32]), name="__truncsfhf2")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.bitcast(f32_bits_to_f16_bits(b, b.bitcast(fn.args[0], I32)), F16))

    fn = ir.Function(module, ir.FunctionType(F32, [F16]), name="__extendhfsf2")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.bitcast(f16_bits_to_f32_bits(b, b.bitcast(fn.args[0], I16)), F32))

    fn = ir.Function(module, ir.FunctionType(F16, [F64]), name="__truncdfhf2")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    narrow = f64_to_f32_round_to_odd(b, module, fn.args[0])
    b.ret(b.bitcast(f32_bits_to_f16_bits(b, b.bitcast(narrow, I32)), F16))
    for name in ("__truncsfhf2", "__extendhfsf2", "__truncdfhf2"):
        module.globals[name].attributes.add("nounwind")
