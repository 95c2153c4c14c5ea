"""The LLVM backend's target setup, JIT, machine-code disk cache and argument packing.

``_resolve_target("llvm")`` gives the host CPU and its features (``"llvm:<cpu>"`` a named
CPU); ``_jit(ir_text, name, cpu, features, triple)`` optimizes the IR at O3, compiles it
with MCJIT and returns an ``LLVMKernelModule``. Machine code is cached on disk under
``$SCHEDLANG_CACHE/llvm/`` (default ``~/.cache/schedlang/llvm/``), keyed by the
unoptimized IR, so a second process skips the optimizer (``OPTIMIZER_RUNS`` counts the
optimizer runs in this process). ``pack_args`` builds the argument array a kernel reads.
Example::

    cpu, features = _resolve_target("llvm")
    mod = _jit(ir_text, "k", cpu, features, llvm.get_process_triple())
    argv = pack_args(args, {"a": a, "n": a.size}); rc = mod.call(argv.ctypes.data, 4)
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import tempfile
import threading

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from ..algo import types as T
from ..errors import ArgumentError, CompileError
from .llvm_host_check import missing_feature

__all__ = ["LLVMKernelModule", "pack_args", "data_address", "float32_to_bfloat16_bits",
           "OPTIMIZER_RUNS"]

# Bumped when the way machine code is produced changes without changing the IR text.
_CACHE_FORMAT = 3      # 2: each object carries a digest of itself, its key and its IR;
                       # 3: x86 code without SSE4a

# Counts optimizer runs in this process (a cache hit does not run it).
OPTIMIZER_RUNS = 0

_LLVM_LOCK = threading.RLock()


# ============================================================================ public API

_NOT_CHECKED = object()


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
        # why this machine cannot run it (an instruction it lacks); code for a named CPU
        # is checked against this machine's features on first use
        self._cannot_run = _NOT_CHECKED if features != _resolve_target("llvm")[1] else None
        self._engine = engine  # keeps the machine code mapped
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)(address)

    @property
    def entry(self):
        """The kernel's entry point as a ctypes function ``(argv, nthreads) -> status``, for
        callers that repeat a call ``call`` has already run (no conversion, no checks)."""
        return self._fn

    def function_address(self, name: str) -> int:
        """The address of another function defined in this module (0 when there is none)."""
        return self._engine.get_function_address(name)

    def call(self, args_address, nthreads: int) -> int:
        """Run the kernel on the uint64 argument array at ``args_address`` (an int, or a
        ctypes array of uint64, passed by address); returns its status. Code this machine
        cannot run is refused (CompileError) rather than run, which would kill the process."""
        if self._cannot_run is not None and self.cannot_run:
            raise CompileError(self.cannot_run)
        if isinstance(args_address, int):
            args_address = ctypes.c_void_p(args_address)
        return int(self._fn(args_address, int(nthreads)))

    @property
    def cannot_run(self):
        """None, or why this machine cannot run the code (compiled for another CPU, it uses
        an instruction whose feature this CPU lacks; running it would kill the process)."""
        if self._cannot_run is _NOT_CHECKED:
            found = missing_feature(self.assembly, _resolve_target("llvm")[1])
            self._cannot_run = None if found is None else (
                f"this kernel was compiled for {self.cpu} and uses {found[0].split()[0]} "
                f"({found[1]}), which this machine's CPU ({llvm.get_host_cpu_name()}) lacks; "
                "it can be inspected (kern.source) but not run here: compile with "
                "target='llvm' to run it on this machine")
        return self._cannot_run

    @cannot_run.setter
    def cannot_run(self, why):
        if why is not None:
            self._cannot_run = why

    @property
    def assembly(self):
        """The machine code as assembly text (made on first use from the optimized IR)."""
        if getattr(self, "_assembly", None) is None:
            with _LLVM_LOCK:
                mod = llvm.parse_assembly(self.source)
                self._assembly = _target_machine(self.cpu, self.features).emit_assembly(mod)
        return self._assembly

    def __repr__(self):
        return f"<LLVMKernelModule {self.name} cpu={self.cpu} from_cache={self.from_cache}>"



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
    return data_address(v)


def _data_address_reader():
    """A function giving the address of a numpy array's data. ``a.ctypes.data`` builds a
    ctypes object per call (microseconds, a good part of a small kernel's call); where
    this interpreter lays arrays out as numpy's C struct says (the data pointer right
    after the object header), the pointer is read from there, checked once on a probe."""
    probe = np.arange(3, dtype=np.float32)
    offset = object.__basicsize__          # ob_refcnt and ob_type: 16 bytes on 64-bit
    try:
        if ctypes.c_void_p.from_address(id(probe) + offset).value == probe.ctypes.data:
            read = ctypes.c_void_p.from_address
            return lambda a: read(id(a) + offset).value or 0
    except (ValueError, OverflowError, TypeError):
        pass
    return lambda a: a.ctypes.data


data_address = _data_address_reader()


def _scalar_bytes(arg, v) -> np.ndarray:
    dt = arg.dtype.element()
    try:
        if dt.name == "bfloat16" and not isinstance(v, np.uint16):
            # rounded once to bfloat16 (float32 holds the result exactly)
            value = v.item() if isinstance(v, np.generic) else v
            arr = float32_to_bfloat16_bits(np.array([T.round_to_float(value, dt)], np.float32))
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
        keep_freed_buffers()
        _INITIALIZED = True


# glibc's mallopt parameters, and the values kernels run with (see keep_freed_buffers)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
KEPT_BUFFER_BYTES = 32 << 20      # glibc's largest mmap threshold on 64-bit
TRIM_BYTES = 256 << 20


def keep_freed_buffers():
    """Make glibc's malloc reuse freed blocks of up to 32 MB instead of unmapping them.
    A kernel allocates its stored intermediates on every call. By default, glibc maps
    blocks over 128 KB fresh from the kernel and unmaps them on free, unless earlier
    frees in the process happened to raise its adaptive threshold. The calls then page
    fault on every fresh page: a batched attention matmul with a softmax (two 2 MB
    intermediates) ran 2.1 ms per call in some processes and 0.66 ms in others, with
    1,060 page faults per call. Fixed thresholds give every process the fast case; freed
    memory up to 256 MB stays with the process. Other C libraries are left alone.
    Returns whether the thresholds were set. Example: ``keep_freed_buffers()``."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):
        return False           # not glibc (musl has mallopt, but no such thresholds)
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, KEPT_BUFFER_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))


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
    if cpu in _X86_32_BIT_CPUS and llvm.get_default_triple().startswith("x86_64"):
        # LLVM aborts the whole process generating 64-bit code for these
        raise CompileError(f"the CPU {cpu!r} in target {target!r} is a 32-bit x86 CPU, and "
                           "kernels are 64-bit (x86_64) code; use a 64-bit CPU name such as "
                           "'x86-64', 'x86-64-v3', 'skylake-avx512' or 'znver3', or 'llvm' "
                           "for this machine")
    return cpu, ""


# The x86 CPUs LLVM knows without 64-bit mode (no FeatureX86_64 in LLVM's X86.td)
_X86_32_BIT_CPUS = frozenset(
    "i386 i486 i586 i686 pentium pentium-mmx pentium_mmx pentiumpro pentium_pro pentium2 "
    "pentium_ii pentium3 pentium3m pentium_iii pentium_iii_no_xmm_regs pentium-m pentium_m "
    "pentium4 pentium4m pentium_4 pentium_4_sse3 prescott yonah lakemont k6 k6-2 k6-3 "
    "athlon athlon-tbird athlon-xp athlon-mp athlon-4 winchip-c6 winchip2 c3 c3-2 "
    "geode".split())


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
        cpu=cpu, features=_codegen_features(features), opt=3, jit=True)


def _codegen_features(features):
    """``features`` as code generation uses them: on x86, without AMD's SSE4a. LLVM picks
    its ``insertq`` for some vector shuffles on AMD CPUs, a legacy-SSE instruction (no
    VEX form) between AVX ones: with it a 16-lane padding copy ran 11x slower (0.53
    against 0.048 ms, 64 x 58 x 58 floats, Zen 3) than the same code without it."""
    if not llvm.get_default_triple().startswith(("x86_64", "i386", "i686")):
        return features
    return ",".join(f for f in features.split(",") if f and f != "+sse4a") + ",-sse4a"


# ======================================================================== JIT and cache

# The O3 pipelines tried in turn, as (slp_vectorization, loop_vectorization): LLVM's SLP
# vectorizer sometimes emits a function that fails verification (an instruction that does
# not dominate its uses; seen in small unrolled max-reductions with a select), and machine
# code generation then aborts the whole process. Such a function is optimized again without
# that pass.
_PIPELINES = ((True, True), (False, True), (False, False))


def _optimize(ir_text: str, name: str, cpu: str, features: str):
    """``ir_text`` parsed and optimized at O3: a module that passes LLVM's verifier."""
    broken = None
    for slp, loop in _PIPELINES:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = loop
        pto.slp_vectorization = slp
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(_target_machine(cpu, features), pto)
        pb.getModulePassManager().run(mod, pb)
        try:
            mod.verify()
            return mod
        except RuntimeError as e:
            broken = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    raise CompileError(f"kernel {name!r}: LLVM's optimizer produced invalid code ({broken}); "
                       "change the schedule (for example vectorize or unroll a different "
                       "loop) to avoid it")


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

    mod = _optimize(ir_text, name, cpu, features)
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


def cache_root():
    """The schedlang cache directory: ``$SCHEDLANG_CACHE``, else the user cache directory
    (``$XDG_CACHE_HOME``, else ``~/.cache``) plus ``schedlang``; machine code under ``llvm/``,
    the tuning database beside it. Example: ``cache_root()``."""
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                  ".cache")
    return os.environ.get("SCHEDLANG_CACHE") or os.path.join(user_cache, "schedlang")


def _cache_dir():
    """The machine-code cache directory, created if needed; None when it is not writable."""
    path = os.path.join(cache_root(), "llvm")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.R_OK) else None


_OBJECT_MAGIC = b"schedlang-object\n"


def _object_digest(key, obj: bytes, source: str) -> bytes:
    return hashlib.sha256(b"\0".join([key.encode(), obj, source.encode("utf-8")])).hexdigest() \
        .encode()


def _cache_read(cache_dir, key):
    """(machine code, IR) stored under ``key``, or None. An entry whose digest does not
    match (a damaged file, or another kernel's object copied over it) is deleted: loading
    it would crash the process or run the wrong code."""
    paths = [os.path.join(cache_dir, key + ext) for ext in (".o", ".ll")]
    try:
        with open(paths[0], "rb") as f:
            data = f.read()
        with open(paths[1], "r", encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    head, _, obj = data[len(_OBJECT_MAGIC):].partition(b"\n")
    if data.startswith(_OBJECT_MAGIC) and obj and head == _object_digest(key, obj, source):
        return obj, source
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass
    return None


def _cache_write(cache_dir, key, obj: bytes, source: str):
    # The IR first: a reader that finds the object finds its IR too. Each file is written
    # to a temporary name and renamed, so a concurrent reader sees all of it or nothing.
    try:
        _atomic_write(os.path.join(cache_dir, key + ".ll"), source.encode("utf-8"))
        _atomic_write(os.path.join(cache_dir, key + ".o"), _OBJECT_MAGIC
                      + _object_digest(key, obj, source) + b"\n" + obj)
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
