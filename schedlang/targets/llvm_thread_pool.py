"""The process-wide thread pool that runs the LLVM backend's ``parallel`` loops.

Starting and joining threads for every parallel loop cost about 45 µs per loop on the
2-core test machine, several percent of a millisecond kernel with three parallel stages.
So the worker threads are started once, on first use, and kept: between jobs a worker
spins briefly (the next parallel stage usually follows within microseconds), then sleeps
on a condition variable. The pool is LLVM IR too (no C compiler, no library to ship),
JIT-compiled once per process; kernels call its entry point

    i32 schedlang_parallel_run(ptr worker, ptr state, i64 helpers)

which runs ``worker(state)`` on the calling thread and on up to ``helpers`` pool threads
at once, returns when all of them have returned, and gives 1. It gives 0 without running
anything when the pool is busy with another job (a parallel loop inside a parallel loop,
or two Python threads running kernels at once); the kernel then starts threads of its
own as before, so a busy pool costs speed, never correctness. ``worker`` takes the work
from ``state`` (an atomic iteration counter, see ``llvm_runtime``), so any number of
threads may call it and each iteration runs once.
Example: ``ensure_thread_pool()`` before finalizing a module that declares ``POOL_RUN``.
"""
from __future__ import annotations

import ctypes
import os

import llvmlite.binding as llvm
from llvmlite import ir

from .llvm_jit import _LLVM_LOCK, _init_llvm, _jit
from .llvm_runtime import I32, I64, PTR, POOL_RUN, POOL_RUN_TYPE, declare_c_function

I8 = ir.IntType(8)
VOID = ir.VoidType()
_INIT = "schedlang_pool_init"

# A worker that finds no job spins (a pause instruction each) for about this many ticks
# of the CPU's cycle counter, 3-8 ms at its 2.5-6 GHz, before it sleeps on the condition
# variable, as OpenMP runtimes spin for milliseconds: waking a sleeping thread costs 30-40
# us on the 2-core test VM (measured: a 0.2 ms two-thread conv after a 2 ms cache flush
# took 0.24 ms with 0.4 ms of spinning, 0.20 ms with this). _SPINS_BEFORE_SLEEP bounds
# the spins where the counter does not advance. The caller waiting for its helpers
# yields the CPU after _SPINS_BEFORE_YIELD spins (a helper may have been descheduled).
_TICKS_BEFORE_SLEEP = 15_000_000
_SPINS_BEFORE_SLEEP = 1 << 22
_SPINS_BEFORE_YIELD = 4096
# Threads the pool starts at most; a larger request shares them.
_MAX_HELPERS = 255
# Bytes reserved for a pthread_mutex_t / pthread_cond_t (40 / 48 with glibc, 64 / 48 on
# macOS); they are initialized by pthread_*_init, never by a static initializer.
_SYNC_BYTES = 256


_POOL = None   # the JIT-compiled pool of this process (kept alive while the process runs)


def ensure_thread_pool():
    """JIT-compile the pool once per process and make ``POOL_RUN`` resolvable by the
    modules compiled or loaded after it. Threads start only when a kernel first runs a
    parallel loop. Example: ``ensure_thread_pool(); engine.finalize_object()``."""
    global _POOL
    with _LLVM_LOCK:
        if _POOL is not None:
            return
        _init_llvm()
        triple = llvm.get_process_triple()
        module = build_pool_module(triple)
        # generic code: the pool is the same for every target CPU of this machine
        pool = _jit(str(module), POOL_RUN, "generic", "", triple)
        llvm.add_symbol(POOL_RUN, pool.address)
        init = ctypes.CFUNCTYPE(None)(pool.function_address(_INIT))
        init()
        # a forked child has none of the parent's threads: it starts its own when needed
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=init)
        _POOL = (pool, init)


# The published job: the worker function, its state, how many helpers may join.
_JOB_TYPE = ir.LiteralStructType([PTR, PTR, I64])


class _Globals:
    """The pool's state, each hot field on its own cache line."""

    def __init__(self, module):
        def var(name, typ, align=64):
            g = ir.GlobalVariable(module, typ, name="schedlang_pool." + name)
            g.linkage = "internal"
            g.initializer = ir.Constant(typ, None)
            g.align = align
            g.type = PTR   # an opaque pointer, like every other pointer in the module
            return g
        self.busy = var("busy", I32)          # 1 while a job owns the pool
        self.threads = var("threads", I64)    # helpers started so far
        self.generation = var("generation", I64)   # bumped for each job
        self.job = var("job", _JOB_TYPE)
        self.taken = var("taken", I64)        # helper slots claimed in this job
        self.done = var("done", I64)          # helper slots finished in this job
        sync = ir.ArrayType(I8, _SYNC_BYTES)
        self.mutex = var("mutex", sync)
        self.cond = var("cond", sync)


def _job_field(b, g, index):
    return b.gep(g.job, [I32(0), I32(index)], inbounds=True, source_etype=_JOB_TYPE)


def build_pool_module(triple: str) -> ir.Module:
    """The pool as an LLVM module for ``triple``: its state, ``schedlang_pool_init``, the
    helper threads' main loop and ``POOL_RUN``."""
    module = ir.Module(name="schedlang_pool")
    module.triple = triple
    c = {name: declare_c_function(module, name) for name in (
        "pthread_create", "pthread_detach", "pthread_mutex_init", "pthread_mutex_lock",
        "pthread_mutex_unlock", "pthread_cond_init", "pthread_cond_wait",
        "pthread_cond_broadcast", "sched_yield")}
    if triple.startswith(("x86_64", "i686", "i386")):
        pause = ir.Function(module, ir.FunctionType(VOID, []), name="llvm.x86.sse2.pause")
    else:
        pause = None
    g = _Globals(module)
    _emit_init(module, g, c)
    helper_main = _emit_helper_main(module, g, c, pause)
    _emit_run(module, g, c, pause, helper_main)
    return module


def _store_atomic(b, value, ptr, ordering, align):
    # the builder's store_atomic wants a typed pointer; the instruction itself does not
    b._insert(ir.instructions.StoreAtomicInstr(b.block, value, ptr, ordering, align))


def _relax(b, pause):
    if pause is not None:
        b.call(pause, [])


def _emit_init(module, g, c):
    """``void schedlang_pool_init()``: no threads, no job, fresh mutex and condition
    variable (also run in a forked child, whose copies may have been held by a thread
    that does not exist there)."""
    fn = ir.Function(module, ir.FunctionType(VOID, []), name=_INIT)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for var in (g.threads, g.generation, g.taken, g.done):
        b.store(I64(0), var)
    b.store(I32(0), g.busy)
    b.call(c["pthread_mutex_init"], [g.mutex, ir.Constant(PTR, None)])
    b.call(c["pthread_cond_init"], [g.cond, ir.Constant(PTR, None)])
    b.ret_void()


def _emit_helper_main(module, g, c, pause):
    """``ptr helper_main(ptr seen)``: a pool thread. ``seen`` is the generation when it was
    started. It waits for the generation to change (spinning, then sleeping), claims a
    helper slot of the new job and, if one is left, runs the job's worker."""
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR]), name="schedlang_pool.helper")
    fn.linkage = "internal"
    clock = ir.Function(module, ir.FunctionType(I64, []), name="llvm.readcyclecounter")
    blk = {n: fn.append_basic_block(n) for n in (
        "entry", "wait", "spin", "spin_next", "sleep", "sleep_check", "sleep_wait", "woke",
        "got", "run", "next")}
    b = ir.IRBuilder(blk["entry"])
    first_seen = b.ptrtoint(fn.args[0], I64)
    b.branch(blk["wait"])

    b.position_at_end(blk["wait"])
    seen = b.phi(I64, name="seen")
    seen.add_incoming(first_seen, blk["entry"])
    spin_start = b.call(clock, [])
    b.branch(blk["spin"])

    b.position_at_end(blk["spin"])
    i = b.phi(I64, name="i")
    i.add_incoming(I64(0), blk["wait"])
    gen_spun = b.load_atomic(g.generation, "acquire", 8, typ=I64)
    b.cbranch(b.icmp_unsigned("!=", gen_spun, seen), blk["got"], blk["spin_next"])

    b.position_at_end(blk["spin_next"])
    _relax(b, pause)
    i_next = b.add(i, I64(1))
    i.add_incoming(i_next, blk["spin_next"])
    ticks = b.sub(b.call(clock, []), spin_start)
    keep_spinning = b.and_(b.icmp_unsigned("<", i_next, I64(_SPINS_BEFORE_SLEEP)),
                           b.icmp_unsigned("<", ticks, I64(_TICKS_BEFORE_SLEEP)))
    b.cbranch(keep_spinning, blk["spin"], blk["sleep"])

    b.position_at_end(blk["sleep"])
    b.call(c["pthread_mutex_lock"], [g.mutex])
    b.branch(blk["sleep_check"])
    b.position_at_end(blk["sleep_check"])
    # the generation is bumped under the mutex, so a wake-up cannot be missed
    gen_slept = b.load_atomic(g.generation, "acquire", 8, typ=I64)
    b.cbranch(b.icmp_unsigned("!=", gen_slept, seen), blk["woke"], blk["sleep_wait"])
    b.position_at_end(blk["sleep_wait"])
    b.call(c["pthread_cond_wait"], [g.cond, g.mutex])
    b.branch(blk["sleep_check"])
    b.position_at_end(blk["woke"])
    b.call(c["pthread_mutex_unlock"], [g.mutex])
    b.branch(blk["got"])

    b.position_at_end(blk["got"])
    gen = b.phi(I64, name="gen")
    gen.add_incoming(gen_spun, blk["spin"])
    gen.add_incoming(gen_slept, blk["woke"])
    # A slot taken here belongs to the job whose fields are published now: the caller
    # resets ``taken`` after writing them, and closes the job by pushing ``taken`` past
    # its slots before it lets the next job in.
    slot = b.atomic_rmw("add", g.taken, I64(1), "seq_cst")
    helpers = b.load_atomic(_job_field(b, g, 2), "acquire", 8, typ=I64)
    b.cbranch(b.icmp_unsigned("<", slot, helpers), blk["run"], blk["next"])

    b.position_at_end(blk["run"])
    worker = b.load(_job_field(b, g, 0), typ=PTR)
    state = b.load(_job_field(b, g, 1), typ=PTR)
    b.call(_callable(b, worker), [state])
    b.atomic_rmw("add", g.done, I64(1), "seq_cst")
    b.branch(blk["next"])

    b.position_at_end(blk["next"])
    seen.add_incoming(gen, blk["next"])
    b.branch(blk["wait"])
    return fn


_WORKER_TYPE = ir.FunctionType(PTR, [PTR])


def _callable(b, fn_pointer):
    """``fn_pointer`` (a ``ptr``) as a value llvmlite calls indirectly as a
    ``ptr worker(ptr state)``; the cast is ``ptr`` to ``ptr`` in the IR, a no-op (built
    directly: the builder's ``bitcast`` returns its operand when the types print alike)."""
    cast = ir.instructions.CastInstr(b.block, "bitcast", fn_pointer,
                                     ir.PointerType(_WORKER_TYPE))
    b._insert(cast)
    return cast


def _emit_run(module, g, c, pause, helper_main):
    """``i32 schedlang_parallel_run(ptr worker, ptr state, i64 helpers)``: see the module
    docstring."""
    fn = ir.Function(module, POOL_RUN_TYPE, name=POOL_RUN)
    fn.attributes.add("nounwind")
    worker, state, want = fn.args
    blk = {n: fn.append_basic_block(n) for n in (
        "entry", "busy", "owned", "grow", "grow_one", "grown", "alone", "publish",
        "wait", "wait_spin", "wait_yield", "wait_next", "finish")}
    b = ir.IRBuilder(blk["entry"])
    tid = b.alloca(I64, name="tid")
    tid.type = PTR
    pair = b.cmpxchg(g.busy, I32(0), I32(1), "acquire", "monotonic")
    b.cbranch(b.extract_value(pair, 1), blk["owned"], blk["busy"])
    b.position_at_end(blk["busy"])
    b.ret(I32(0))

    # ---- start helpers up to the request (only the pool's owner does this)
    b.position_at_end(blk["owned"])
    capped = b.select(b.icmp_signed("<", want, I64(_MAX_HELPERS)), want, I64(_MAX_HELPERS))
    b.branch(blk["grow"])
    b.position_at_end(blk["grow"])
    have = b.load(g.threads, typ=I64)
    b.cbranch(b.icmp_signed("<", have, capped), blk["grow_one"], blk["grown"])
    b.position_at_end(blk["grow_one"])
    seen = b.inttoptr(b.load_atomic(g.generation, "acquire", 8, typ=I64), PTR)
    rc = b.call(c["pthread_create"], [tid, ir.Constant(PTR, None), helper_main, seen])
    started = b.icmp_signed("==", rc, I32(0))
    with b.if_then(started):
        b.call(c["pthread_detach"], [b.load(tid, typ=I64)])
        b.store(b.add(have, I64(1)), g.threads)
    # a thread that cannot be started ends the growing: the job runs on fewer
    b.cbranch(started, blk["grow"], blk["grown"])

    b.position_at_end(blk["grown"])
    have = b.load(g.threads, typ=I64)
    helpers = b.select(b.icmp_signed("<", have, capped), have, capped)
    b.cbranch(b.icmp_signed(">", helpers, I64(0)), blk["publish"], blk["alone"])

    b.position_at_end(blk["alone"])
    b.call(_callable(b, worker), [state])
    _store_atomic(b, I32(0), g.busy, "release", 4)
    b.ret(I32(1))

    # ---- publish the job, wake the sleepers, work alongside the helpers
    b.position_at_end(blk["publish"])
    b.store(worker, _job_field(b, g, 0))
    b.store(state, _job_field(b, g, 1))
    _store_atomic(b, helpers, _job_field(b, g, 2), "release", 8)
    _store_atomic(b, I64(0), g.done, "seq_cst", 8)
    _store_atomic(b, I64(0), g.taken, "seq_cst", 8)
    b.call(c["pthread_mutex_lock"], [g.mutex])
    gen = b.load(g.generation, typ=I64)
    _store_atomic(b, b.add(gen, I64(1)), g.generation, "seq_cst", 8)
    b.call(c["pthread_cond_broadcast"], [g.cond])
    b.call(c["pthread_mutex_unlock"], [g.mutex])
    b.call(_callable(b, worker), [state])
    # close the job: a helper that comes later finds no slot; wait for those that came
    taken = b.atomic_rmw("add", g.taken, helpers, "seq_cst")
    claimed = b.select(b.icmp_signed("<", taken, helpers), taken, helpers)
    b.branch(blk["wait"])

    b.position_at_end(blk["wait"])
    k = b.phi(I64, name="k")
    k.add_incoming(I64(0), blk["publish"])
    done = b.load_atomic(g.done, "acquire", 8, typ=I64)
    b.cbranch(b.icmp_signed(">=", done, claimed), blk["finish"], blk["wait_spin"])
    b.position_at_end(blk["wait_spin"])
    b.cbranch(b.icmp_signed("<", k, I64(_SPINS_BEFORE_YIELD)), blk["wait_next"],
              blk["wait_yield"])
    b.position_at_end(blk["wait_yield"])
    b.call(c["sched_yield"], [])
    b.branch(blk["wait_next"])
    b.position_at_end(blk["wait_next"])
    _relax(b, pause)
    k.add_incoming(b.add(k, I64(1)), blk["wait_next"])
    b.branch(blk["wait"])

    b.position_at_end(blk["finish"])
    _store_atomic(b, I32(0), g.busy, "release", 4)
    b.ret(I32(1))
    return fn
