"""The LLVM CPU backend: loop IR -> LLVM IR -> optimized, JIT-compiled machine code.

``compile_llvm(stmt, args, name)`` emits one exported function
``i32 @<name>(ptr %args, i32 %nthreads)`` with ``llvmlite.ir``, optimizes it at O3 for the
host CPU (or ``llvm:<cpu>``), JIT-compiles it with MCJIT and returns an
``LLVMKernelModule`` whose ``call(args_address, nthreads)`` runs it. Machine code is cached
on disk under ``$SCHEDLANG_CACHE/llvm/`` (default ``~/.cache/schedlang/llvm/``), keyed by
the unoptimized IR, so a second process skips the optimizer. ``pack_args`` builds the
argument array the function reads. Example::

    mod = compile_llvm(stmt, [KernelArg("a", "buffer", float32), KernelArg("n", "scalar",
                       int64)], "k")
    argv = pack_args(args, {"a": a, "n": a.size}); rc = mod.call(argv.ctypes.data, 4)
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import tempfile
import threading
from contextlib import contextmanager

import llvmlite
import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ..algo import expr as E
from ..algo import types as T
from ..algo.types import DType
from ..errors import ArgumentError, CompileError
from ..lower import ir as L
from . import llvm_runtime as RT

__all__ = ["compile_llvm", "pack_args", "LLVMKernelModule", "LLVMCodegen"]

# Bumped when the way machine code is produced changes without changing the IR text.
_CACHE_FORMAT = 1
# Stack allocations above this many bytes go to the heap (threads have small stacks).
_MAX_STACK_ALLOCATION = 4096
# Heap allocations are aligned for full-width AVX-512 access.
_HEAP_ALIGN = 64

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

# Names the generated code may call: a kernel with one of them would call itself.
_RESERVED_SYMBOLS = frozenset(
    ["malloc", "free", "posix_memalign", "pthread_create", "pthread_join", "memset", "memcpy",
     "memmove"]
    + [f + sfx for f in ("exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "sin", "cos",
                         "sincos", "tan", "tanh", "erf", "floor", "ceil", "fabs", "pow", "fmod",
                         "fma", "round", "trunc", "rint", "nearbyint")
       for sfx in ("", "f")])

# Counts optimizer runs in this process (a cache hit does not run it).
OPTIMIZER_RUNS = 0

_LLVM_LOCK = threading.RLock()


# ============================================================================ public API

class LLVMKernelModule:
    """A JIT-compiled kernel: ``source`` (optimized LLVM IR), ``address``, ``call``.

    The object owns the execution engine holding the machine code; the code stays valid as
    long as the object is alive. ``from_cache`` tells whether the machine code was loaded
    from the disk cache (the optimizer did not run). ``call(args_address, nthreads)`` runs
    the kernel through ctypes, which releases the GIL, and returns its status: 0 on success,
    an ``Assert`` code, or 2 when an allocation failed.
    """

    def __init__(self, name, source, address, engine, from_cache, cpu, features):
        self.name, self.source, self.address = name, source, address
        self.from_cache, self.cpu, self.features = from_cache, cpu, features
        self._engine = engine  # keeps the machine code mapped
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)(address)

    def call(self, args_address: int, nthreads: int) -> int:
        """Run the kernel on the uint64 argument array at ``args_address``; returns its status."""
        return int(self._fn(ctypes.c_void_p(args_address), int(nthreads)))

    def __repr__(self):
        return f"<LLVMKernelModule {self.name} cpu={self.cpu} from_cache={self.from_cache}>"


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
    with _LLVM_LOCK:
        _init_llvm()
        triple = llvm.get_process_triple()
        tm = _target_machine(cpu, features)
        module = LLVMCodegen(name, args, triple, str(tm.target_data)).generate(stmt)
        return _jit(str(module), name, cpu, features, triple)


def pack_args(args: list, values: dict) -> np.ndarray:
    """The uint64 argument array for a kernel compiled from ``args``, filled from ``values``.

    ``values`` maps each argument name to a C-contiguous numpy array of the argument's dtype
    (bfloat16 buffers are uint16 arrays) or an int address, for buffers; and to a Python or
    numpy number, for scalars. A scalar of dtype T is stored as
    ``np.array([v], dtype=T.numpy).view(np.uint8)`` copied into the first bytes of its
    8-byte slot; a bfloat16 scalar given as a number is rounded to nearest-even, one given
    as a ``np.uint16`` is taken as the raw bits. The caller keeps the arrays alive while
    the kernel runs.
    """
    out = np.zeros(len(args), dtype=np.uint64)
    raw = out.view(np.uint8)
    for i, arg in enumerate(args):
        if arg.name not in values:
            raise ArgumentError(f"no value for the kernel argument {arg.name!r}")
        v = values[arg.name]
        if arg.kind == "buffer":
            out[i] = _buffer_address(arg, v)
        else:
            data = _scalar_bytes(arg, v)
            raw[8 * i: 8 * i + data.size] = data
    return out


# ===================================================================== argument packing

def _buffer_address(arg, v) -> int:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if not isinstance(v, np.ndarray):
        raise ArgumentError(f"the buffer argument {arg.name!r} needs a numpy array, got "
                            f"{type(v).__name__}")
    if v.dtype != arg.dtype.numpy:
        raise ArgumentError(f"the buffer argument {arg.name!r} has dtype {v.dtype}; the kernel "
                            f"expects {arg.dtype.numpy} ({arg.dtype.name})")
    if not v.flags.c_contiguous:
        raise ArgumentError(f"the buffer argument {arg.name!r} is not C-contiguous; pass "
                            "np.ascontiguousarray(...)")
    return v.ctypes.data


def _scalar_bytes(arg, v) -> np.ndarray:
    dt = arg.dtype.element()
    try:
        if dt.name == "bfloat16" and not isinstance(v, np.uint16):
            arr = float32_to_bfloat16_bits(np.array([v], dtype=np.float32))
        else:
            arr = np.array([v], dtype=dt.numpy)
    except (OverflowError, ValueError, TypeError) as exc:
        raise ArgumentError(f"the scalar argument {arg.name!r} ({dt.name}) cannot hold "
                            f"{v!r}: {exc}") from None
    return arr.view(np.uint8)


def float32_to_bfloat16_bits(x) -> np.ndarray:
    """bfloat16 bits (uint16) of float32 values, rounded to nearest-even; NaN stays NaN."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet_nan = (bits >> 16) | 0x40
    return np.where(np.isnan(x), quiet_nan, rounded).astype(np.uint16)


# ========================================================================= target setup

_INITIALIZED = False
_KNOWN_CPUS = None


def _init_llvm():
    global _INITIALIZED
    if not _INITIALIZED:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _INITIALIZED = True


def _resolve_target(target: str):
    """(cpu name, feature string) of a target string ``llvm`` or ``llvm:<cpu>``."""
    if target == "llvm":
        _init_llvm()
        try:
            features = llvm.get_host_cpu_features().flatten()
        except RuntimeError:  # not every platform can list its features
            features = ""
        return llvm.get_host_cpu_name(), features
    if not isinstance(target, str) or not target.startswith("llvm:"):
        raise CompileError(f"the LLVM backend does not know the target {target!r}; use 'llvm' "
                           "(this machine's CPU) or 'llvm:<cpu>' (e.g. 'llvm:skylake-avx512')")
    cpu = target[len("llvm:"):]
    known = _known_cpus()
    if not cpu or (known and cpu not in known):
        near = sorted(c for c in known if cpu and (cpu in c or c in cpu))[:8]
        hint = f"; close names: {', '.join(near)}" if near else ""
        raise CompileError(f"LLVM does not know the CPU {cpu!r} in target {target!r}{hint}; "
                           "use an LLVM CPU name such as 'skylake-avx512', 'znver3', 'x86-64-v3'"
                           ", or 'llvm' for this machine")
    return cpu, ""


def _known_cpus() -> frozenset:
    """The CPU names LLVM accepts for this machine's architecture.

    LLVM only prints its CPU table (for the CPU name ``help``) and only warns, on stderr,
    about an unknown CPU; so the table is read once from the process's own output.
    """
    global _KNOWN_CPUS
    with _LLVM_LOCK:
        if _KNOWN_CPUS is not None:
            return _KNOWN_CPUS
        _init_llvm()
        text = _capture_native_output(
            lambda: llvm.Target.from_default_triple().create_target_machine(cpu="help"))
        names, in_cpus = set(), False
        for line in text.splitlines():
            if line.startswith("Available CPUs"):
                in_cpus = True
            elif line.startswith("Available features"):
                in_cpus = False
            elif in_cpus and line.strip():
                names.add(line.split()[0])
        # An empty table (another LLVM build) means: trust the name, do not reject.
        _KNOWN_CPUS = frozenset(names)
        return _KNOWN_CPUS


def _capture_native_output(fn) -> str:
    """Run ``fn`` with file descriptors 1 and 2 sent to a temp file; return what it wrote."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as f:
        saved = os.dup(1), os.dup(2)
        try:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            fn()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        f.seek(0)
        return f.read().decode("utf-8", "replace")


def _target_machine(cpu, features):
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=features, opt=3, jit=True)


# ======================================================================== JIT and cache

def _jit(ir_text: str, name: str, cpu: str, features: str, triple: str) -> LLVMKernelModule:
    """Machine code for ``ir_text``: from the disk cache, or optimized and compiled now."""
    global OPTIMIZER_RUNS
    key = hashlib.sha256("\0".join([
        str(_CACHE_FORMAT), llvmlite.__version__, ".".join(map(str, llvm.llvm_version_info)),
        cpu, features, ir_text]).encode()).hexdigest()
    cache_dir = _cache_dir()
    if cache_dir is not None:
        hit = _cache_read(cache_dir, key)
        if hit is not None:
            obj, source = hit
            empty = llvm.parse_assembly(f'target triple = "{triple}"\n')
            engine = llvm.create_mcjit_compiler(empty, _target_machine(cpu, features))
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            engine.finalize_object()
            address = engine.get_function_address(name)
            if address:
                return LLVMKernelModule(name, source, address, engine, True, cpu, features)

    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    tm = _target_machine(cpu, features)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    OPTIMIZER_RUNS += 1
    source = str(mod)

    objects = []
    engine = llvm.create_mcjit_compiler(mod, _target_machine(cpu, features))
    engine.set_object_cache(notify_func=lambda _module, buf: objects.append(bytes(buf)))
    engine.finalize_object()
    address = engine.get_function_address(name)
    if not address:  # pragma: no cover - LLVM always emits the exported function
        raise CompileError(f"LLVM produced no function {name!r}")
    if cache_dir is not None and len(objects) == 1:
        _cache_write(cache_dir, key, objects[0], source)
    return LLVMKernelModule(name, source, address, engine, False, cpu, features)


def _cache_dir():
    """The machine-code cache directory, created if needed; None when it is not writable."""
    root = os.environ.get("SCHEDLANG_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "schedlang")
    path = os.path.join(root, "llvm")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.R_OK) else None


def _cache_read(cache_dir, key):
    try:
        with open(os.path.join(cache_dir, key + ".o"), "rb") as f:
            obj = f.read()
        with open(os.path.join(cache_dir, key + ".ll"), "r", encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return None
    return (obj, source) if obj else None


def _cache_write(cache_dir, key, obj: bytes, source: str):
    # The IR first: a reader that finds the object finds its IR too. Each file is written
    # to a temporary name and renamed, so a concurrent reader sees all of it or nothing.
    try:
        _atomic_write(os.path.join(cache_dir, key + ".ll"), source.encode("utf-8"))
        _atomic_write(os.path.join(cache_dir, key + ".o"), obj)
    except OSError:
        pass


def _atomic_write(path, data: bytes):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ============================================================================== types

def _element_type(dt: DType):
    """The LLVM scalar type of a value of ``dt`` in registers (bool is i1, bfloat16 i16)."""
    if dt.is_bool:
        return I1
    if dt.is_int:
        return ir.IntType(dt.bits)
    return {"float16": F16, "bfloat16": I16, "float32": F32, "float64": F64}[dt.name]


def reg_type(dt: DType):
    """The LLVM type of a (possibly vector) value of ``dt`` in registers."""
    elem = _element_type(dt)
    return ir.VectorType(elem, dt.lanes) if dt.lanes > 1 else elem


def mem_type(dt: DType):
    """The LLVM type of one element of ``dt`` in memory (bool takes one byte)."""
    return I8 if dt.is_bool else _element_type(dt)


def _mangle(ty) -> str:
    """The overload suffix of an LLVM intrinsic for ``ty`` (``f32``, ``v16f32``, ``i64``)."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_mangle(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(ty)]


def _const_int(e):
    """The Python int of a constant integer expression (scalar or broadcast), else None."""
    if isinstance(e, L.Broadcast):
        e = e.value
    if isinstance(e, E.Const) and not e.dtype.is_float:
        return int(e.value)
    return None


def _is_f32_or_f64(dt: DType) -> bool:
    return dt.name in ("float32", "float64")


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


class LLVMCodegen:
    """Translate one loop IR statement into an LLVM module with one exported function.

    ``generate(stmt)`` returns the ``ir.Module``. There is one method per node type:
    ``stmt_<Class>`` for statements and ``expr_<Class>`` for expressions. Names resolve
    through ``self.vars`` (scalar args, loop and let variables -> LLVM values) and
    ``self.buffers`` (buffer args and allocations -> (pointer, element DType)), both
    scoped with ``_bind``. A ``parallel`` loop body is outlined into its own function whose
    closure carries the enclosing values it uses.
    """

    def __init__(self, name: str, args: list, triple: str = "", data_layout: str = ""):
        self.name, self.args = name, list(args)
        self.module = ir.Module(name=name)
        self.module.triple = triple
        self.module.data_layout = data_layout
        self.vars = {}        # name -> ir.Value
        self.var_dtypes = {}  # name -> DType of the bound value
        self.buffers = {}     # name -> (ir.Value pointer, DType element)
        self.dense_lets = {}  # let var name -> True when bound to a stride-1 ramp
        self.fs = None
        self._outlined = 0
        self._uses_half = False

    # ------------------------------------------------------------------ module level

    def generate(self, stmt) -> ir.Module:
        """Emit the kernel function for ``stmt`` and return the module."""
        if self.name in _RESERVED_SYMBOLS or self.name.startswith(("llvm.", "__")):
            raise CompileError(f"the kernel name {self.name!r} is taken by a C library or "
                               "LLVM symbol the generated code may call; rename the kernel")
        self._all_buffers = {a.name for a in self.args if a.kind == "buffer"}
        L.walk_stmt(stmt, lambda st: self._all_buffers.add(st.buffer)
                    if isinstance(st, L.Allocate) else None)
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
        self.fs.builder.ret(I32(0))
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

    def _scalar_cond(self, e):
        if e.dtype.lanes != 1:
            raise AssertionError(f"internal error: a branch condition must be scalar: {e}")
        return self.expr(e)

    def stmt_Store(self, s):
        ptr, _ = self._buffer(s.buffer)
        dt = s.value.dtype
        value = self._to_memory(self.expr(s.value), dt)
        elem = mem_type(dt)
        align = mem_type_bytes(dt)
        lanes = s.index.dtype.lanes
        if lanes == 1:
            self._alias(self.b.store(value, self._element_ptr(ptr, self._index(s.index), elem),
                                     align=align), s.buffer)
            return
        base = self._dense_ramp_base(s.index)
        if base is not None:
            self._alias(self.b.store(value, self._element_ptr(ptr, base, elem), align=align),
                        s.buffer)
            return
        # A scatter: lane by lane, in lane order (the last lane wins on a repeated index).
        index = self._index(s.index)
        for lane in range(lanes):
            p = self._element_ptr(ptr, self.b.extract_element(index, I32(lane)), elem)
            self._alias(self.b.store(self.b.extract_element(value, I32(lane)), p, align=align),
                        s.buffer)

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
        count = I64(1)
        for x in s.extents:
            count = self.b.mul(count, self._as_i64(self.expr(x), x.dtype))
        nbytes = self.b.mul(count, I64(nbytes_elem))
        # max(bytes, 1): a zero or negative size still gets a distinct, freeable block.
        nbytes = self.b.select(self.b.icmp_signed("<", nbytes, I64(1)), I64(1), nbytes)
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

    def stmt_For(self, s):
        if s.kind in ("gpu_block", "gpu_thread"):
            raise CompileError(f"loop {s.var!r} is a {s.kind} loop, and gpu_blocks/gpu_threads "
                               "need a GPU target; compile for a GPU or use parallel/vectorize")
        if s.kind == "parallel" and not self.fs.in_parallel:
            self._parallel_for(s)
            return
        lo = self.expr(s.min)
        extent = self._coerce_int(self.expr(s.extent), s.extent.dtype, s.min.dtype)
        self._serial_loop(s.var, s.min.dtype, lo, extent, s.body)

    def _serial_loop(self, var, dtype, lo, extent, body):
        """``for var in [lo, lo + extent)``: a guarded, bottom-tested loop."""
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
        b.cbranch(b.icmp_signed("<", nxt, hi), loop_bb, exit_bb)
        b.position_at_end(exit_bb)

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
        finally:
            self.fs, self.vars, self.var_dtypes, self.buffers, self.dense_lets = saved

        runner = RT.parallel_runner(self.module, body_fn)
        rc = self.b.call(runner, [closure, extent, self.fs.nthreads])
        self._exit_if(self.b.icmp_signed("!=", rc, I32(0)), rc)

    # ================================================================== expressions

    def expr(self, e):
        """The LLVM value of expression ``e`` (i1 for bool, i16 for bfloat16)."""
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
        if dt.name == "bfloat16":
            return ir.Constant(I16, int(float32_to_bfloat16_bits(np.float32(value))))
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

    # ------------------------------------------------------------------ memory

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
        # A gather: lane by lane (the backend may still combine them).
        index = self._index(e.index)
        v = ir.Constant(ir.VectorType(elem, lanes), ir.Undefined)
        for lane in range(lanes):
            p = self._element_ptr(ptr, self.b.extract_element(index, I32(lane)), elem)
            v = self.b.insert_element(v, self._alias(self.b.load(p, typ=elem, align=align),
                                                     e.buffer), I32(lane))
        return self._from_memory(v, dt)

    def _alias(self, instr, buffer):
        """Tag a load / store with its buffer's alias scope: distinct buffers never alias
        (the caller checks that outputs do not overlap inputs), which lets LLVM keep
        accumulators in registers across loops that also read other buffers."""
        scopes = self.__dict__.setdefault("_scopes", {})
        if "__domain__" not in scopes:
            scopes["__domain__"] = self.module.add_metadata(
                [ir.MetaDataString(self.module, "schedlang.buffers")])
        if buffer not in scopes:
            scopes[buffer] = self.module.add_metadata(
                [ir.MetaDataString(self.module, f"schedlang.buffer.{buffer}"),
                 scopes["__domain__"]])
        names = self.__dict__.setdefault("_alias_names", [])
        if not names:
            names.extend(sorted(self._all_buffers))
        own = scopes[buffer]
        others = []
        for n in names:
            if n != buffer:
                if n not in scopes:
                    scopes[n] = self.module.add_metadata(
                        [ir.MetaDataString(self.module, f"schedlang.buffer.{n}"),
                         scopes["__domain__"]])
                others.append(scopes[n])
        instr.set_metadata("alias.scope", self.module.add_metadata([own]))
        if others:
            instr.set_metadata("noalias", self.module.add_metadata(others))
        return instr

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

    # ------------------------------------------------------------------ operators

    def expr_BinOp(self, e):
        op, dt = e.op, e.a.dtype
        if op in ("and", "or"):
            a, b = self.expr(e.a), self.expr(e.b)
            return self.b.and_(a, b) if op == "and" else self.b.or_(a, b)
        if dt.is_float and _is_f32_or_f64(dt) and op in ("add", "sub"):
            fused = self._try_fmuladd(e)
            if fused is not None:
                return fused
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.name in ("float16", "bfloat16"):
            # Narrow floats compute in float32 and round once per operation.
            wide = T.float32.with_lanes(dt.lanes)
            out = self._float_binop(op, self._to_f32(a, dt), self._to_f32(b, dt), wide)
            return out if op in E.CMP_OPS else self._from_f32(out, dt)
        if dt.is_float:
            return self._float_binop(op, a, b, dt)
        return self._int_binop(op, a, b, dt, e.b)

    def _try_fmuladd(self, e):
        """``a*b + c`` (and the sub forms) as ``llvm.fmuladd``, so LLVM may fuse them."""
        def is_mul(x):
            return isinstance(x, E.BinOp) and x.op == "mul" and x.a.dtype == e.a.dtype

        if is_mul(e.a):
            mul, other, mul_first = e.a, e.b, True
        elif is_mul(e.b):
            mul, other, mul_first = e.b, e.a, False
        else:
            return None
        x, y, c = self.expr(mul.a), self.expr(mul.b), self.expr(other)
        if e.op == "sub":
            if mul_first:
                c = self.b.fneg(c)          # x*y - c
            else:
                x = self.b.fneg(x)          # c - x*y
        fn = self._intrinsic(f"llvm.fmuladd.{_mangle(x.type)}", x.type, [x.type] * 3)
        return self.b.call(fn, [x, y, c])

    _FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

    def _float_binop(self, op, a, b, dt):
        bld = self.b
        if op == "add":
            return bld.fadd(a, b, flags=("contract",))
        if op == "sub":
            return bld.fsub(a, b, flags=("contract",))
        if op == "mul":
            return bld.fmul(a, b, flags=("contract",))
        if op == "div":
            return bld.fdiv(a, b)
        if op == "floordiv":
            return self._math1("floor", bld.fdiv(a, b))
        if op == "mod":
            # Python's float modulo: a - floor(a / b) * b (takes the divisor's sign).
            return bld.fsub(a, bld.fmul(self._math1("floor", bld.fdiv(a, b)), b))
        if op in ("min", "max"):
            return self._minmax(op, a, b, dt)
        if op == "ne":
            return bld.fcmp_unordered("!=", a, b)
        if op in self._FCMP:
            return bld.fcmp_ordered(self._FCMP[op], a, b)
        raise AssertionError(f"internal error: {op} on {dt}")

    def _minmax(self, op, a, b, dt):
        """min/max as compare + select (``a < b ? a : b``), which maps to vminps/vpminsd."""
        bld = self.b
        cmp = "<" if op == "min" else ">"
        if dt.is_float:
            return bld.select(bld.fcmp_ordered(cmp, a, b), a, b)
        if dt.is_signed:
            return bld.select(bld.icmp_signed(cmp, a, b), a, b)
        return bld.select(bld.icmp_unsigned(cmp, a, b), a, b)

    def _int_binop(self, op, a, b, dt, b_expr):
        bld = self.b
        signed = dt.is_signed
        if op == "add":
            return bld.add(a, b)
        if op == "sub":
            return bld.sub(a, b)
        if op == "mul":
            return bld.mul(a, b)
        if op in ("div", "floordiv", "mod"):
            return self._int_divmod(op == "mod", a, b, dt, _const_int(b_expr))
        if op in ("min", "max"):
            return self._minmax(op, a, b, dt)
        if op == "bitand":
            return bld.and_(a, b)
        if op == "bitor":
            return bld.or_(a, b)
        if op == "bitxor":
            return bld.xor(a, b)
        if op in ("shl", "shr"):
            # The amount is taken modulo the width, so no shift is ever poison.
            amount = bld.and_(b, self._const_like(b.type, dt.bits - 1))
            if op == "shl":
                return bld.shl(a, amount)
            return bld.ashr(a, amount) if signed else bld.lshr(a, amount)
        if op in self._FCMP:
            pred = self._FCMP[op]
            return bld.icmp_signed(pred, a, b) if signed else bld.icmp_unsigned(pred, a, b)
        raise AssertionError(f"internal error: {op} on {dt}")

    def _int_divmod(self, want_mod, a, b, dt, const_b):
        """Python floor division / modulo; x // 0 == x % 0 == 0 and nothing ever traps.

        x86 ``idiv`` traps on a zero divisor and on INT_MIN / -1, so both are steered to a
        divisor of 1 and their results chosen by select. A constant positive divisor skips
        that, leaving LLVM free to turn the division into multiplies and shifts.
        """
        bld = self.b
        zero, one = self._const_like(a.type, 0), self._const_like(a.type, 1)
        if not dt.is_signed:
            if const_b is not None and const_b != 0:
                return bld.urem(a, b) if want_mod else bld.udiv(a, b)
            if const_b == 0:
                return zero
            is_zero = bld.icmp_unsigned("==", b, zero)
            safe = bld.select(is_zero, one, b)
            out = bld.urem(a, safe) if want_mod else bld.udiv(a, safe)
            return bld.select(is_zero, zero, out)
        if const_b == 0:
            return zero
        if const_b == -1:
            return zero if want_mod else bld.sub(zero, a)
        if const_b is not None and const_b > 0:
            q, r = bld.sdiv(a, b), bld.srem(a, b)
            negative = bld.icmp_signed("<", r, zero)  # remainder's sign differs from b's
            if want_mod:
                return bld.select(negative, bld.add(r, b), r)
            return bld.select(negative, bld.sub(q, one), q)
        minus_one = self._const_like(a.type, -1)
        is_zero = bld.icmp_signed("==", b, zero)
        is_minus_one = bld.icmp_signed("==", b, minus_one)
        safe = bld.select(bld.or_(is_zero, is_minus_one), one, b)
        q, r = bld.sdiv(a, safe), bld.srem(a, safe)
        # Floor: when the remainder is nonzero and its sign differs from the divisor's.
        adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                          bld.icmp_signed("<", bld.xor(r, safe), zero))
        if want_mod:
            out = bld.select(adjust, bld.add(r, safe), r)
            return bld.select(bld.or_(is_zero, is_minus_one), zero, out)
        out = bld.select(adjust, bld.sub(q, one), q)
        out = bld.select(is_minus_one, bld.sub(zero, a), out)
        return bld.select(is_zero, zero, out)

    def expr_UnOp(self, e):
        dt = e.a.dtype
        a = self.expr(e.a)
        if e.op == "not":
            return self.b.xor(a, self._const_like(a.type, -1 if not dt.is_bool else 1))
        if e.op == "neg":
            if dt.name == "bfloat16":
                return self.b.xor(a, self._const_like(a.type, -0x8000))  # flip the sign bit
            if dt.is_float:
                return self.b.fneg(a)
            return self.b.sub(self._const_like(a.type, 0), a)
        raise AssertionError(f"internal error: unary {e.op}")

    def expr_Select(self, e):
        cond, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        lanes = e.dtype.lanes
        if e.cond.dtype.lanes > 1 and lanes == 1:
            raise AssertionError(f"internal error: vector condition with scalar values: {e}")
        if e.cond.dtype.lanes == 1 and lanes > 1:
            cond = self._splat(cond, lanes)
        return self.b.select(cond, t, f)

    # ------------------------------------------------------------------ casts

    def expr_Cast(self, e):
        return self._cast(self.expr(e.value), e.value.dtype, e.dtype)

    def _cast(self, v, src: DType, dst: DType):
        bld = self.b
        lanes = src.lanes
        se, de = src.element(), dst.element()
        if se == de:
            return v
        dst_ty = reg_type(de.with_lanes(lanes))
        if de.is_bool:
            if se.is_float:
                v = self._to_f32(v, src) if se.name in ("float16", "bfloat16") else v
                return bld.fcmp_unordered("!=", v, self._const_like(v.type, 0.0))
            return bld.icmp_unsigned("!=", v, self._const_like(v.type, 0))
        if se.is_bool or se.is_int:
            unsigned = se.is_bool or se.is_unsigned
            if de.is_int:
                sw, dw = (1 if se.is_bool else se.bits), de.bits
                if dw < sw:
                    return bld.trunc(v, dst_ty)
                if dw == sw:
                    return v
                return bld.zext(v, dst_ty) if unsigned else bld.sext(v, dst_ty)
            if de.name in ("float32", "float64"):
                return bld.uitofp(v, dst_ty) if unsigned else bld.sitofp(v, dst_ty)
            # Narrow floats: through float32 (exact for every int that fits in a half).
            f32 = reg_type(T.float32.with_lanes(lanes))
            wide = bld.uitofp(v, f32) if unsigned else bld.sitofp(v, f32)
            return self._from_f32(wide, de.with_lanes(lanes))
        # se is a float from here on.
        if de.is_int:
            if se.name in ("float16", "bfloat16"):
                v = self._to_f32(v, src)
            kind = "fptoui" if de.is_unsigned else "fptosi"
            # The saturating forms: NaN -> 0 and out-of-range values clamp; never poison.
            fn = self._intrinsic(f"llvm.{kind}.sat.{_mangle(dst_ty)}.{_mangle(v.type)}", dst_ty,
                                 [v.type])
            return bld.call(fn, [v])
        if se.name in ("float16", "bfloat16"):
            v = self._to_f32(v, src)
            se = T.float32
        if de.name == "float64":
            return bld.fpext(v, dst_ty)
        if de.name == "float32":
            return bld.fptrunc(v, dst_ty) if se.name == "float64" else v
        if se.name == "float64":
            # Round to odd into float32, then to nearest-even below: correctly rounded.
            v = RT.f64_to_f32_round_to_odd(bld, self.module, v)
        return self._from_f32(v, de.with_lanes(lanes))

    def _to_f32(self, v, dt: DType):
        """A float16 / bfloat16 value widened to float32 (exact)."""
        lanes = dt.lanes
        f32 = reg_type(T.float32.with_lanes(lanes))
        if dt.name == "float16":
            return self.b.fpext(v, f32)
        if dt.name == "bfloat16":
            i32 = reg_type(T.int32.with_lanes(lanes))
            bits = self.b.shl(self.b.zext(v, i32), self._const_like(i32, 16))
            return self.b.bitcast(bits, f32)
        return v

    def _from_f32(self, v, dt: DType):
        """A float32 value rounded (nearest-even) to float16 / bfloat16."""
        lanes = dt.lanes
        if dt.name == "float16":
            return self.b.fptrunc(v, reg_type(dt))
        if dt.name == "bfloat16":
            bld = self.b
            i32 = reg_type(T.int32.with_lanes(lanes))
            bits = bld.bitcast(v, i32)
            c = lambda x: self._const_like(i32, x)  # noqa: E731
            bias = bld.add(c(0x7FFF), bld.and_(bld.lshr(bits, c(16)), c(1)))
            rounded = bld.lshr(bld.add(bits, bias), c(16))
            # A NaN keeps its upper bits and is made quiet, so it cannot round to infinity.
            is_nan = bld.fcmp_unordered("uno", v, v)
            quiet = bld.or_(bld.lshr(bits, c(16)), c(0x40))
            return bld.trunc(bld.select(is_nan, quiet, rounded), reg_type(dt))
        return v

    def _coerce_int(self, v, src: DType, dst: DType):
        """An integer value of ``src`` converted to ``dst``'s width (loop bounds, vars)."""
        if reg_type(src) == reg_type(dst) or not (src.is_int and dst.is_int):
            return v
        return self._cast(v, src, dst.with_lanes(src.lanes))

    # ------------------------------------------------------------------ math

    _LLVM_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
                  "floor": "floor", "ceil": "ceil", "abs": "fabs", "pow": "pow"}
    _LIBM = {"tanh", "erf"}

    def expr_Call(self, e):
        dt = e.dtype
        args = [self.expr(a) for a in e.args]
        if e.name == "abs" and not dt.is_float:
            a = args[0]
            if dt.is_unsigned or dt.is_bool:
                return a
            zero = self._const_like(a.type, 0)
            return self.b.select(self.b.icmp_signed("<", a, zero), self.b.sub(zero, a), a)
        if not dt.is_float:
            raise AssertionError(f"internal error: {e.name} of the non-float type {dt}")
        narrow = dt.name in ("float16", "bfloat16")
        if narrow:
            args = [self._to_f32(a, x.dtype) for a, x in zip(args, e.args)]
        out = self._math(e.name, args)
        return self._from_f32(out, dt) if narrow else out

    def _math(self, name, args):
        if name == "rsqrt":
            s = self._math1("sqrt", args[0])
            return self.b.fdiv(self._const_like(s.type, 1.0), s)
        if name in self._LIBM:
            return self._libm_per_lane(name, args[0])
        if name not in self._LLVM_MATH:
            raise AssertionError(f"internal error: unknown math function {name}")
        ty = args[0].type
        fn = self._intrinsic(f"llvm.{self._LLVM_MATH[name]}.{_mangle(ty)}", ty, [ty] * len(args))
        return self.b.call(fn, args)

    def _math1(self, name, a):
        return self._math(name, [a])

    def _libm_per_lane(self, name, a):
        """A libm function (``tanhf``/``tanh``, ``erff``/``erf``), called once per lane."""
        elem = a.type.element if isinstance(a.type, ir.VectorType) else a.type
        cname = name + ("f" if elem == F32 else "")
        fn = self._c_function(cname, ir.FunctionType(elem, [elem]))
        if not isinstance(a.type, ir.VectorType):
            return self.b.call(fn, [a])
        out = ir.Constant(a.type, ir.Undefined)
        for lane in range(a.type.count):
            x = self.b.extract_element(a, I32(lane))
            out = self.b.insert_element(out, self.b.call(fn, [x]), I32(lane))
        return out


def mem_type_bytes(dt: DType) -> int:
    """Bytes of one element of ``dt`` in memory (the natural alignment of its accesses)."""
    return 1 if dt.is_bool else max(1, dt.bits // 8)


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
        if isinstance(s, L.Store):
            buffer_names.add(s.buffer)

    L.walk_stmt(stmt, on_stmt)
    return var_names, buffer_names
