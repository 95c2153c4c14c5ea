"""The LLVM CPU backend: loop IR -> LLVM IR -> optimized, JIT-compiled machine code.

``compile_llvm(stmt, args, name)`` emits one exported function
``i32 @<name>(ptr %args, i32 %nthreads)`` with ``llvmlite.ir``, optimizes it at O3 for the
host CPU (or ``llvm:<cpu>``), JIT-compiles it with MCJIT and returns an
``LLVMKernelModule`` whose ``call(args_address, nthreads)`` runs it. Machine code is cached
on disk under ``$SCHEDLANG_CACHE/llvm/`` (default ``~/.cache/schedlang/llvm/``), keyed by
the unoptimized IR, so a second process skips the optimizer. ``pack_args`` builds the
argument array the function reads. This module holds the statement, memory, vector and
parallel-loop code generation; the JIT, cache and argument packing live in ``llvm_jit``,
expression arithmetic in ``llvm_arith`` and the IR type helpers in ``llvm_types``.
Example::

    mod = compile_llvm(stmt, [KernelArg("a", "buffer", float32), KernelArg("n", "scalar",
                       int64)], "k")
    argv = pack_args(args, {"a": a, "n": a.size}); rc = mod.call(argv.ctypes.data, 4)
"""
from __future__ import annotations

from contextlib import contextmanager

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ..algo import expr as E
from ..algo import types as T
from ..algo.types import DType
from ..errors import CompileError
from ..lower import ir as L
from . import llvm_jit
from . import llvm_runtime as RT
from .llvm_arith import ArithmeticCodegen
from .llvm_jit import (_LLVM_LOCK, LLVMKernelModule, _init_llvm, _jit, _resolve_target,
                       _target_machine, float32_to_bfloat16_bits, pack_args)
from .llvm_memory import MemoryCodegen
from .llvm_thread_pool import ensure_thread_pool
from .llvm_types import (F16, F32, F64, I1, I8, I16, I32, I64, PTR, _const_int, _element_type,
                         _mangle, intrinsic_operand_type, mem_type, mem_type_bytes, reg_type)

__all__ = ["compile_llvm", "pack_args", "LLVMKernelModule", "LLVMCodegen"]

# Stack allocations above this many bytes go to the heap (threads have small stacks).
_MAX_STACK_ALLOCATION = 4096
# Heap allocations are aligned for full-width AVX-512 access.
_HEAP_ALIGN = 64

# Names the generated code may call: a kernel with one of them would call itself.
_RESERVED_SYMBOLS = frozenset(
    ["malloc", "free", "posix_memalign", "pthread_create", "pthread_join", "memset", "memcpy",
     "memmove"]
    + [f + sfx for f in ("exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "sin", "cos",
                         "sincos", "tan", "tanh", "erf", "floor", "ceil", "fabs", "pow", "fmod",
                         "fma", "round", "trunc", "rint", "nearbyint")
       for sfx in ("", "f")])


def __getattr__(name):
    # ``OPTIMIZER_RUNS`` is a counter that the JIT bumps in ``llvm_jit``; read it from
    # there, so ``llvm.OPTIMIZER_RUNS`` stays current instead of a copy taken at import.
    if name == "OPTIMIZER_RUNS":
        return llvm_jit.OPTIMIZER_RUNS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ============================================================================ public API

def compile_llvm(stmt, args: list, name: str, target: str = "llvm") -> LLVMKernelModule:
    """Compile the loop IR ``stmt`` into a native function named ``name``.

    The function is ``i32 name(uint64_t *args, int32_t nthreads)``. ``args[i]`` holds
    argument ``i`` of ``args`` (a list of ``KernelArg``): for a buffer, its base address;
    for a scalar of dtype T, the bytes of ``np.array([v], dtype=T.numpy).view(np.uint8)``
    copied into the first bytes of its 8-byte slot (the rest is ignored; a bool is one
    byte 0/1, a bfloat16 its 16 bits) -- ``pack_args`` does exactly this. ``nthreads`` bounds
    the threads a ``parallel`` loop uses (the calling thread included; <= 1 runs serially).
    The result is 0, the code of a failed ``Assert``, or 2 when a heap allocation failed.
    ``target`` is ``"llvm"`` (the host CPU and all its features) or ``"llvm:<cpu>"`` (an
    LLVM CPU name such as ``skylake-avx512``, with that CPU's default features); an unknown
    CPU or a GPU-only construct raises ``CompileError``.
    """
    cpu, features = _resolve_target(target)
    features, cannot_run = _instruction_features(stmt, target, cpu, features)
    with _LLVM_LOCK:
        _init_llvm()
        triple = llvm.get_process_triple()
        tm = _target_machine(cpu, features)
        module = LLVMCodegen(name, args, triple, str(tm.target_data),
                             _has_vector_scalef(tm, cpu, features)).generate(stmt)
        ir_text = str(module)
        if RT.POOL_RUN in ir_text:
            ensure_thread_pool()   # before the kernel's call to it is linked
        compiled = _jit(ir_text, name, cpu, features, triple)
    compiled.cannot_run = cannot_run
    return compiled


_VECTOR_SCALEF = {}


def _has_vector_scalef(tm, cpu, features):
    """True when the target has AVX-512's 16-lane ``vscalefps``: LLVM lowers a 16-lane
    float ``llvm.ldexp`` to it rather than to a libm call per lane. Asked of LLVM once per
    target by compiling a probe."""
    key = (cpu, features)
    if key not in _VECTOR_SCALEF:
        vt, it = "<16 x float>", "<16 x i32>"
        probe = (f"declare {vt} @llvm.ldexp.v16f32.v16i32({vt}, {it})\n"
                 f"define {vt} @probe({vt} %a, {it} %b) {{\n"
                 f"  %r = call {vt} @llvm.ldexp.v16f32.v16i32({vt} %a, {it} %b)\n"
                 f"  ret {vt} %r\n}}\n")
        asm = tm.emit_assembly(llvm.parse_assembly(probe))
        _VECTOR_SCALEF[key] = "scalef" in asm and "call" not in asm
    return _VECTOR_SCALEF[key]


def _instruction_features(stmt, target, cpu, features):
    """The CPU features the tensorized instructions of ``stmt`` need, checked against the
    target: the host target must have them (else ``CompileError``); a named CPU gets them
    added. Returns (feature string, why this machine cannot run the kernel, or None)."""
    needed = {}
    L.walk_stmt(stmt, lambda s: needed.update({f: s.intrinsic.name for f in s.intrinsic.features})
                if isinstance(s, L.TensorOp) else None)
    if not needed:
        return features, None
    host = set(_resolve_target("llvm")[1].split(","))
    missing = sorted(f for f in needed if "+" + f not in host)
    if target == "llvm":
        if missing:
            f = missing[0]
            raise CompileError(f"tensorize onto {needed[f]} needs the CPU feature {f}, which this "
                               f"machine's CPU ({cpu}) lacks; use a schedule without it here, or "
                               f"compile for a CPU that has it (target='llvm:<cpu>') to inspect "
                               "the code")
        return features, None
    extra = ",".join("+" + f for f in sorted(needed))
    why = None
    if missing:
        why = (f"this kernel was compiled for {cpu} and uses {needed[missing[0]]} "
               f"({missing[0]}), which this machine's CPU lacks; it can be inspected "
               "(kern.source) but not run here")
    return (features + "," + extra if features else extra), why



# ========================================================================== codegen

class _FunctionState:
    """Per-function code generation state: builder, entry block, live heap allocations."""

    def __init__(self, fn: ir.Function, in_parallel: bool, nthreads=None):
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        start = fn.append_basic_block("start")
        # The entry block holds only allocas (hoisted out of every loop) and a branch.
        self.entry_branch = ir.IRBuilder(self.entry).branch(start)
        self.builder = ir.IRBuilder(start)
        self.heap = []  # heap pointers live at the current point, outermost first
        self.in_parallel = in_parallel
        self.nthreads = nthreads
        self.tagged = []  # (load / store, buffer): their noalias lists come at the end


class LLVMCodegen(MemoryCodegen, ArithmeticCodegen):
    """Translate one loop IR statement into an LLVM module with one exported function.

    ``generate(stmt)`` returns the ``ir.Module``. There is one method per node type:
    ``stmt_<Class>`` for statements and ``expr_<Class>`` for expressions. Names resolve
    through ``self.vars`` (scalar args, loop and let variables -> LLVM values) and
    ``self.buffers`` (buffer args and allocations -> (pointer, element DType)), both
    scoped with ``_bind``. A ``parallel`` loop body is outlined into its own function whose
    closure carries the enclosing values it uses. Operators, casts and math calls come
    from ``ArithmeticCodegen`` (``llvm_arith``).
    """

    def __init__(self, name: str, args: list, triple: str = "", data_layout: str = "",
                 vector_scalef=False):
        self.name, self.args = name, list(args)
        self.vector_scalef = vector_scalef   # the target has AVX-512's 16-lane vscalefps
        self.accumulation = None    # the value of the accumulating Store being generated
        self.module = ir.Module(name=name)
        self.module.triple = triple
        self.module.data_layout = data_layout
        self.vars = {}        # name -> ir.Value
        self.var_dtypes = {}  # name -> DType of the bound value
        self.buffers = {}     # name -> (ir.Value pointer, DType element)
        self.dense_lets = {}  # let var name -> True when bound to a stride-1 ramp
        self.fs = None
        self._outlined = 0
        self._loop_ids = 0          # loop metadata nodes made so far (each loop has its own)
        self._uses_half = False
        self.streaming_stores = 0   # non-temporal stores emitted so far

    # ------------------------------------------------------------------ module level

    def generate(self, stmt) -> ir.Module:
        """Emit the kernel function for ``stmt`` and return the module."""
        if self.name in _RESERVED_SYMBOLS or self.name.startswith(("llvm.", "__")):
            raise CompileError(f"the kernel name {self.name!r} is taken by a C library or "
                               "LLVM symbol the generated code may call; rename the kernel")
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR, I32]), name=self.name)
        fn.attributes.add("nounwind")
        argv, nthreads = fn.args
        argv.name, nthreads.name = "args", "nthreads"
        self.fs = _FunctionState(fn, in_parallel=False, nthreads=nthreads)
        b = self.fs.builder
        for i, arg in enumerate(self.args):
            slot = b.gep(argv, [I64(i)], inbounds=True, source_etype=I64, name=f"{arg.name}.slot")
            dt = arg.dtype.element()
            if arg.kind == "buffer":
                ptr = b.inttoptr(b.load(slot, typ=I64), PTR, name=arg.name)
                self.buffers[arg.name] = (ptr, dt)
            else:
                # Little-endian: the value's bytes start at the slot's first byte.
                value = b.load(slot, typ=mem_type(dt), align=mem_type_bytes(dt),
                               name=arg.name)
                if dt.is_bool:
                    value = b.icmp_unsigned("!=", value, I8(0))
                self.vars[arg.name] = value
                self.var_dtypes[arg.name] = dt
                if dt.name == "float16":
                    self._uses_half = True
        self.stmt(stmt)
        if self.streaming_stores:
            # streaming stores are weakly ordered: make them visible before returning
            RT.store_fence(self.fs.builder, self.module)
        self.fs.builder.ret(I32(0))
        self._finish_alias(self.fs)
        if self._uses_half:
            RT.define_half_libcalls(self.module)
        return self.module

    def _c_function(self, name, fnty=None):
        return RT.declare_c_function(self.module, name, fnty)

    def _intrinsic(self, name, ret, arg_types):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(arg_types)), name=name)
        return fn

    # ------------------------------------------------------------------ scopes

    @contextmanager
    def _bind(self, table, name, value):
        """Bind ``name`` in ``table`` for the duration of a ``with`` block (shadowing)."""
        missing = object()
        old = table.get(name, missing)
        table[name] = value
        try:
            yield
        finally:
            if old is missing:
                del table[name]
            else:
                table[name] = old

    @contextmanager
    def _bind_var(self, name, value, dtype, dense):
        """Bind a variable: its value, its DType, and whether it is a stride-1 ramp."""
        missing = object()
        saved = (self.vars.get(name, missing), self.var_dtypes.get(name, missing),
                 self.dense_lets.get(name, missing))
        self.vars[name], self.var_dtypes[name], self.dense_lets[name] = value, dtype, dense
        try:
            yield
        finally:
            for table, old in zip((self.vars, self.var_dtypes, self.dense_lets), saved):
                if old is missing:
                    table.pop(name, None)
                else:
                    table[name] = old

    @property
    def b(self) -> ir.IRBuilder:
        return self.fs.builder

    def _entry_alloca(self, ty, name="", align=None):
        """An alloca in the entry block of the current function (never inside a loop)."""
        builder = ir.IRBuilder(self.fs.entry)
        builder.position_before(self.fs.entry_branch)
        slot = builder.alloca(ty, name=name)
        slot.type = PTR  # an opaque pointer, like every other pointer in the module
        if align is not None:
            slot.align = align
        return slot

    def _new_block(self, name):
        return self.fs.fn.append_basic_block(name)

    # ------------------------------------------------------------------ error exits

    def _exit_if(self, failed, code):
        """If the i1 ``failed`` holds: free the live heap allocations and return ``code``."""
        fail_bb, ok_bb = self._new_block("fail"), self._new_block("ok")
        branch = self.b.cbranch(failed, fail_bb, ok_bb)
        branch.set_weights([1, 1000])
        self.b.position_at_end(fail_bb)
        self._free_live_heap()
        self.b.ret(code if isinstance(code, ir.Value) else I32(code))
        self.b.position_at_end(ok_bb)

    def _free_live_heap(self):
        free = self._c_function("free")
        for ptr in reversed(self.fs.heap):
            self.b.call(free, [ptr])

    # ================================================================== statements

    def stmt(self, s):
        if s is None:
            return
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise AssertionError(f"internal error: the LLVM backend got the statement "
                                 f"{type(s).__name__}, which lowering should have removed")
        # a statement's expressions are emitted together, in one block: a sub-expression
        # shared by several parents is emitted once (the memo never crosses statements)
        self._memo = {}
        method(s)

    def stmt_Block(self, s):
        for child in s.stmts:
            self.stmt(child)

    def stmt_LetStmt(self, s):
        value = self.expr(s.value)
        with self._bind_var(s.var, value, s.value.dtype, self._is_dense_ramp(s.value)):
            self.stmt(s.body)

    def stmt_Evaluate(self, s):
        self.expr(s.value)

    def stmt_Barrier(self, s):
        raise CompileError("a barrier (GPU block synchronisation) has no meaning on the CPU "
                           "target; compile for a GPU target or drop gpu_threads scheduling")

    def stmt_Assert(self, s):
        ok = self.expr(s.cond)
        if isinstance(ok.type, ir.VectorType):
            ok = self.b.call(self._intrinsic(f"llvm.vector.reduce.and.{_mangle(ok.type)}", I1,
                                             [ok.type]), [ok])
        self._exit_if(self.b.not_(ok), s.code)

    def stmt_IfThenElse(self, s):
        cond = self._scalar_cond(s.cond)
        then_bb, end_bb = self._new_block("then"), self._new_block("endif")
        else_bb = self._new_block("else") if s.else_ is not None else end_bb
        self.b.cbranch(cond, then_bb, else_bb)
        self.b.position_at_end(then_bb)
        self.stmt(s.then)
        self.b.branch(end_bb)
        if s.else_ is not None:
            self.b.position_at_end(else_bb)
            self.stmt(s.else_)
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)

    def stmt_TensorOp(self, s):
        """One dot-product instruction: load the accumulator lanes, pack the two operand
        tiles into registers, call the LLVM intrinsic, store the lanes back."""
        intr = s.intrinsic
        acc_t = reg_type(intr.acc_dtype.with_lanes(intr.lanes))
        out_ptr = self._element_ptr(self._buffer(s.out.buffer)[0], self._index(s.out.base),
                                    mem_type(intr.acc_dtype))
        acc = self._alias(self.b.load(out_ptr, typ=acc_t, align=mem_type_bytes(intr.acc_dtype)),
                          s.out.buffer)
        # operands are packed as 32-bit words, then given the type the intrinsic declares
        # (<32 x bfloat> for vdpbf16ps), not left to LLVM's upgrade of older signatures
        op_t = intrinsic_operand_type(*intr.llvm_operand)
        regs = [self._operand_tile(op, intr) for op in (s.a, s.b)]
        regs = [r if r.type == op_t else self.b.bitcast(r, op_t) for r in regs]
        fn = self._intrinsic(intr.llvm_name, acc_t, [acc_t, op_t, op_t])
        res = self.b.call(fn, [acc] + regs)
        self._alias(self.b.store(res, out_ptr, align=mem_type_bytes(intr.acc_dtype)),
                    s.out.buffer)

    def _operand_tile(self, op, intr):
        """The ``lanes x depth`` tile of one operand, packed lane-major into ``lanes`` 32-bit
        words (``depth`` elements each): one vector load when the tile is contiguous, one
        word broadcast when every lane reads the same elements, else element by element."""
        elem = mem_type(op.dtype)
        ebytes = mem_type_bytes(op.dtype)
        base_ptr = self._buffer(op.buffer)[0]
        base = self._index(op.base)
        lane_s, step_s = op.strides
        n = intr.lanes * intr.depth
        word = ir.VectorType(I32, intr.lanes)
        if step_s == 1 and lane_s == intr.depth:
            v = self.b.load(self._element_ptr(base_ptr, base, elem),
                            typ=ir.VectorType(elem, n), align=ebytes)
            return self.b.bitcast(self._alias(v, op.buffer), word)
        if step_s == 1 and lane_s == 0:
            w = self.b.load(self._element_ptr(base_ptr, base, elem), typ=I32, align=ebytes)
            return self._splat(self._alias(w, op.buffer), intr.lanes)
        v = ir.Constant(ir.VectorType(elem, n), ir.Undefined)
        for lane in range(intr.lanes):
            for step in range(intr.depth):
                off = I64(lane * lane_s + step * step_s)
                x = self.b.load(self._element_ptr(base_ptr, self.b.add(base, off), elem),
                                typ=elem, align=ebytes)
                v = self.b.insert_element(v, self._alias(x, op.buffer),
                                          I32(lane * intr.depth + step))
        return self.b.bitcast(v, word)

    def _scalar_cond(self, e):
        if e.dtype.lanes != 1:
            raise AssertionError(f"internal error: a branch condition must be scalar: {e}")
        return self.expr(e)

    def stmt_Allocate(self, s):
        dt = s.dtype.element()
        elem = mem_type(dt)
        nbytes_elem = mem_type_bytes(dt)
        const_extents = [_const_int(x) for x in s.extents]
        if s.memory == "local" and all(c is not None for c in const_extents):
            count = 1
            for c in const_extents:
                count *= c
            if count * nbytes_elem <= _MAX_STACK_ALLOCATION:
                slot = self._entry_alloca(ir.ArrayType(elem, max(count, 1)), name=s.buffer,
                                          align=_HEAP_ALIGN)
                with self._bind(self.buffers, s.buffer, (slot, dt)):
                    self.stmt(s.body)
                return
        nbytes = self._heap_bytes(s.extents, nbytes_elem)
        out = self._entry_alloca(PTR, name=s.buffer + ".slot")
        rc = self.b.call(self._c_function("posix_memalign"), [out, I64(_HEAP_ALIGN), nbytes])
        self._exit_if(self.b.icmp_signed("!=", rc, I32(0)), 2)
        ptr = self.b.load(out, typ=PTR, name=s.buffer)
        self.fs.heap.append(ptr)
        try:
            with self._bind(self.buffers, s.buffer, (ptr, dt)):
                self.stmt(s.body)
        finally:
            self.fs.heap.pop()
        self.b.call(self._c_function("free"), [ptr])

    def _heap_bytes(self, extents, nbytes_elem):
        """The byte size of a heap buffer of ``extents`` (an empty extent, <= 0, counts as
        0; the result is at least 1, a distinct freeable block). A product that does not
        fit int64 (N**3 floats with N = 2**21) stops the kernel as out of memory: wrapped,
        it would allocate a few bytes and the nest would write past them."""
        b = self.b
        count, overflow = I64(1), ir.Constant(ir.IntType(1), 0)
        for x in list(extents) + [E.Const(nbytes_elem, T.int64)]:
            v = self._as_i64(self.expr(x), x.dtype)
            v = b.select(b.icmp_signed("<", v, I64(0)), I64(0), v)
            r = b.umul_with_overflow(count, v)
            count, overflow = b.extract_value(r, 0), b.or_(overflow, b.extract_value(r, 1))
        # above int64's range is as impossible to allocate as a wrapped product
        overflow = b.or_(overflow, b.icmp_signed("<", count, I64(0)))
        self._exit_if(overflow, 2)
        return b.select(b.icmp_signed("<", count, I64(1)), I64(1), count)

    def stmt_For(self, s):
        if s.kind in ("gpu_block", "gpu_thread"):
            raise CompileError(f"loop {s.var!r} is a {s.kind} loop, and gpu_blocks/gpu_threads "
                               "need a GPU target; compile for a GPU or use parallel/vectorize")
        if s.kind == "parallel" and not self.fs.in_parallel:
            self._parallel_for(s)
            return
        lo = self.expr(s.min)
        extent = self._coerce_int(self.expr(s.extent), s.extent.dtype, s.min.dtype)
        self._serial_loop(s.var, s.min.dtype, lo, extent, s.body, s.rolled)

    def _serial_loop(self, var, dtype, lo, extent, body, rolled=False):
        """``for var in [lo, lo + extent)``: a guarded, bottom-tested loop; ``rolled``: LLVM
        is told not to unroll it."""
        b = self.b
        hi = b.add(lo, extent, name=var + ".end")
        pre = b.block
        loop_bb, exit_bb = self._new_block(var + ".loop"), self._new_block(var + ".exit")
        b.cbranch(b.icmp_signed("<", lo, hi), loop_bb, exit_bb)
        b.position_at_end(loop_bb)
        i = b.phi(lo.type, name=var)
        i.add_incoming(lo, pre)
        with self._bind_var(var, i, dtype, False):
            self.stmt(body)
        b = self.b
        nxt = b.add(i, ir.Constant(lo.type, 1), name=var + ".next")
        i.add_incoming(nxt, b.block)
        latch = b.cbranch(b.icmp_signed("<", nxt, hi), loop_bb, exit_bb)
        if rolled:
            latch.set_metadata("llvm.loop", self._no_unroll_loop_id(var))
        b.position_at_end(exit_bb)

    def _no_unroll_loop_id(self, var):
        """A loop's own ``!llvm.loop`` node asking LLVM not to unroll it: the node names
        itself first, as LLVM's loop IDs do (a unique string keeps two loops' apart
        while it is built)."""
        m = self.b.module
        self._loop_ids += 1
        disable = m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.disable")])
        loop_id = m.add_metadata([ir.MetaDataString(m, f"{var}.{self._loop_ids}")])
        loop_id.operands = (loop_id, disable)
        return loop_id

    # ------------------------------------------------------------------ parallel loops

    def _parallel_for(self, s):
        """Outline the body into ``i32 body(ptr closure, i64 i)`` and run it on threads."""
        lo = self.expr(s.min)
        extent = self._as_i64(self._coerce_int(self.expr(s.extent), s.extent.dtype,
                                               s.min.dtype), s.min.dtype)
        used_vars, used_buffers = _names_used(s.body)
        var_names = [n for n in self.vars if n in used_vars and n != s.var]
        buf_names = [n for n in self.buffers if n in used_buffers]
        captured = [self.vars[n] for n in var_names] + [self.buffers[n][0] for n in buf_names]
        closure_ty = ir.LiteralStructType([v.type for v in captured] + [lo.type])
        closure = self._entry_alloca(closure_ty, name=f"{s.var}.closure")
        for k, v in enumerate(captured + [lo]):
            self.b.store(v, self.b.gep(closure, [I32(0), I32(k)], inbounds=True,
                                       source_etype=closure_ty))

        body_fn = ir.Function(self.module, RT.BODY_FN_TYPE,
                              name=f"{self.name}.par{self._outlined}.{s.var}")
        self._outlined += 1
        body_fn.linkage = "internal"
        body_fn.attributes.add("nounwind")
        # Nothing writes the closure while the loop runs, so its loads may be hoisted out of
        # the loop the runner wraps around an inlined body.
        for attr in ("noalias", "captures(none)"):
            body_fn.args[0].add_attribute(attr)
        saved = (self.fs, self.vars, self.var_dtypes, self.buffers, self.dense_lets)
        streaming_before = self.streaming_stores
        self.fs = _FunctionState(body_fn, in_parallel=True)
        self.vars = {}
        self.var_dtypes = {n: saved[2][n] for n in var_names}
        self.buffers = {}
        self.dense_lets = dict(saved[4])
        try:
            b = self.b
            clo_arg, iteration = body_fn.args
            clo_arg.name, iteration.name = "closure", s.var + ".iter"
            for k, v in enumerate(captured + [lo]):
                field = b.gep(clo_arg, [I32(0), I32(k)], inbounds=True, source_etype=closure_ty)
                loaded = b.load(field, typ=v.type)
                if k < len(var_names):
                    self.vars[var_names[k]] = loaded
                elif k < len(captured):
                    name = buf_names[k - len(var_names)]
                    self.buffers[name] = (loaded, saved[3][name][1])
                else:
                    lo_inner = loaded
            it = iteration if lo.type == I64 else b.trunc(iteration, lo.type)
            with self._bind_var(s.var, b.add(lo_inner, it, name=s.var), s.min.dtype, False):
                self.stmt(s.body)
            self.b.ret(I32(0))
            self._finish_alias(self.fs)
        finally:
            self.fs, self.vars, self.var_dtypes, self.buffers, self.dense_lets = saved

        runner = RT.parallel_runner(self.module, body_fn,
                                    fence=self.streaming_stores > streaming_before)
        rc = self.b.call(runner, [closure, extent, self.fs.nthreads])
        self._exit_if(self.b.icmp_signed("!=", rc, I32(0)), rc)

    # ================================================================== expressions

    def expr(self, e):
        """The LLVM value of expression ``e`` (i1 for bool, i16 for bfloat16)."""
        memo = self.__dict__.setdefault("_memo", {})
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        value = self._expr_uncached(e)
        memo[id(e)] = (e, value)
        return value

    def _expr_uncached(self, e):
        if e.dtype.name == "float16":
            # Any half value may need the conversion helpers (see define_half_libcalls).
            self._uses_half = True
        for cls in type(e).__mro__:
            method = getattr(self, "expr_" + cls.__name__, None)
            if method is not None:
                return method(e)
        raise AssertionError(f"internal error: the LLVM backend cannot compile the expression "
                             f"{type(e).__name__} ({e})")

    # ------------------------------------------------------------------ leaves

    def expr_Const(self, e):
        c = self._scalar_const(e.dtype.element(), e.value)
        if e.dtype.lanes > 1:
            return ir.Constant(reg_type(e.dtype), [c] * e.dtype.lanes)
        return c

    def _scalar_const(self, dt: DType, value):
        ty = _element_type(dt)
        if dt.is_bool:
            return ir.Constant(I1, int(bool(value)))
        if dt.is_int:
            v = int(value) & ((1 << dt.bits) - 1)
            if v >= 1 << (dt.bits - 1):  # print in two's complement, as LLVM reads it
                v -= 1 << dt.bits
            return ir.Constant(ty, v)
        # a float literal beyond the type's range is inf (as numpy's), without numpy's warning
        with np.errstate(over="ignore"):
            if dt.name == "bfloat16":
                # rounded once, from the double: through float32 first could round twice
                exact = T.round_to_float(float(value), T.bfloat16)
                return ir.Constant(I16, int(float32_to_bfloat16_bits(np.float32(exact))))
            if dt.name == "float16":
                return ir.Constant(F16, float(np.float16(value)))
            if dt.name == "float32":
                return ir.Constant(F32, float(np.float32(value)))
        return ir.Constant(F64, float(value))

    def _const_like(self, value_type, py_value):
        """A constant of LLVM type ``value_type`` (splat for vectors)."""
        if isinstance(value_type, ir.VectorType):
            return ir.Constant(value_type, [ir.Constant(value_type.element, py_value)]
                               * value_type.count)
        return ir.Constant(value_type, py_value)

    def expr_Var(self, e):
        if e.name not in self.vars:
            raise AssertionError(f"internal error: the variable {e.name!r} is not defined here "
                                 "(not a scalar argument, loop variable or let)")
        value = self.vars[e.name]
        bound = self.var_dtypes.get(e.name)
        want = reg_type(e.dtype)
        if value.type != want and bound is not None and bound.is_int and e.dtype.is_int:
            return self._coerce_int(value, bound, e.dtype)
        return value

    def _buffer(self, name):
        if name not in self.buffers:
            raise AssertionError(f"internal error: the buffer {name!r} is neither a kernel "
                                 "argument nor an enclosing allocation")
        return self.buffers[name]

    # ------------------------------------------------------------------ vectors

    def _splat(self, value, lanes):
        vty = ir.VectorType(value.type, lanes)
        if isinstance(value, ir.Constant):
            return ir.Constant(vty, [value] * lanes)
        one = self.b.insert_element(ir.Constant(vty, ir.Undefined), value, I32(0))
        return self.b.shuffle_vector(one, ir.Constant(vty, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def expr_Broadcast(self, e):
        value = self.expr(e.value)
        if e.value.dtype.lanes == 1:
            return self._splat(value, e.lanes)
        # A vector repeated: lane i takes lane i % n.
        n = e.value.dtype.lanes
        mask = ir.Constant(ir.VectorType(I32, e.lanes), [i % n for i in range(e.lanes)])
        return self.b.shuffle_vector(value, ir.Constant(value.type, ir.Undefined), mask)

    def expr_Ramp(self, e):
        dt = e.base.dtype
        base = self._splat(self.expr(e.base), e.lanes)
        stride = self._splat(self.expr(e.stride), e.lanes)
        elem = base.type.element
        if dt.is_float:
            steps = ir.Constant(base.type, [ir.Constant(elem, float(i)) for i in range(e.lanes)])
            return self.b.fadd(base, self.b.fmul(stride, steps))
        steps = ir.Constant(base.type, [ir.Constant(elem, i) for i in range(e.lanes)])
        return self.b.add(base, self.b.mul(stride, steps))

    def expr_VectorReduce(self, e):
        dt = e.value.dtype
        value = self.expr(e.value)
        compute_dt = dt
        if dt.name in ("float16", "bfloat16"):
            value, compute_dt = self._to_f32(value, dt), T.float32.with_lanes(dt.lanes)
        ty = value.type
        elem = ty.element
        if e.op in ("add", "mul") and dt.is_float:
            start = ir.Constant(elem, -0.0 if e.op == "add" else 1.0)
            fn = self._intrinsic(f"llvm.vector.reduce.f{e.op}.{_mangle(ty)}", elem, [elem, ty])
            # reassoc lets LLVM add the lanes as a tree instead of one by one.
            out = self.b.call(fn, [start, value], fastmath=("reassoc",))
        elif e.op in ("add", "mul") and not dt.is_bool:
            fn = self._intrinsic(f"llvm.vector.reduce.{e.op}.{_mangle(ty)}", elem, [ty])
            out = self.b.call(fn, [value])
        elif e.op in ("min", "max"):
            out = self._reduce_tree(e.op, value, compute_dt.element())
        else:
            raise AssertionError(f"internal error: vector reduce {e.op} of {dt}")
        if compute_dt is not dt:
            out = self._from_f32(out, dt.element())
        return out

    def _reduce_tree(self, op, value, dt):
        """Combine the lanes of ``value`` pairwise with min/max (same semantics as BinOp)."""
        b = self.b
        n = value.type.count
        undef = ir.Constant(value.type, ir.Undefined)
        while n > 1 and n % 2 == 0:
            half = n // 2
            lo = b.shuffle_vector(value, undef, ir.Constant(ir.VectorType(I32, half),
                                                            list(range(half))))
            hi = b.shuffle_vector(value, undef, ir.Constant(ir.VectorType(I32, half),
                                                            list(range(half, n))))
            value = self._minmax(op, lo, hi, dt)
            n, undef = half, ir.Constant(value.type, ir.Undefined)
        acc = b.extract_element(value, I32(0))
        for lane in range(1, n):
            acc = self._minmax(op, acc, b.extract_element(value, I32(lane)), dt)
        return acc

def _names_used(stmt):
    """(variable names, buffer names) a statement tree mentions, for closure capture."""
    var_names, buffer_names = set(), set()

    def on_expr(n):
        if isinstance(n, E.Var):
            var_names.add(n.name)
        elif isinstance(n, L.Load):
            buffer_names.add(n.buffer)

    def on_stmt(s):
        for x in L.stmt_exprs(s):
            L.walk_expr(x, on_expr)
        if isinstance(s, (L.Store, L.FlatPrefetch)):
            buffer_names.add(s.buffer)
        if isinstance(s, L.TensorOp):
            buffer_names.update(op.buffer for op in s.operands)

    L.walk_stmt(stmt, on_stmt)
    return var_names, buffer_names
