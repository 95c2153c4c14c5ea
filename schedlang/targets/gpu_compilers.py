"""Compilers for GPU kernel source: the vendors' runtime compiler libraries (NVRTC,
hiprtc) through ctypes, their command-line compilers (``nvcc``, ``clang -x hip``) as a
fallback, and ``check_compiles``, which compiles source on a machine without a GPU
(``nvcc -ptx`` + ``ptxas``, ``clang -x hip -S``) so tests check generated code for real.
Example: ``image = compile_source(src, "cuda", "sm_90")``; ``check_compiles(src, "hip")``.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import threading
from ctypes import POINTER as _P, byref, c_char_p, c_int, c_size_t, c_void_p

from ..errors import CompileError


VENDORS = ("cuda", "hip")
_LABEL = {"cuda": "CUDA", "hip": "HIP"}
_COMPILE_TIMEOUT_S = 300


class DriverError(CompileError):
    """A GPU driver, runtime compiler or offline compiler call failed, or none is installed.

    The message names the failing call and the driver's error name and text, and, where the
    fix is known, what to do; ``call`` and ``code`` hold the call's name and status (``None``
    when no call was made). Example::

        try:
            drv = GpuDriver.get("cuda")
        except DriverError as e:
            print(e)   # no CUDA driver (libcuda.so.1) could be loaded: ...
    """

    def __init__(self, message: str, call: str | None = None, code: int | None = None):
        super().__init__(message)
        self.call = call
        self.code = code


def _load_first(names):
    errors = []
    for n in names:
        try:
            return ctypes.CDLL(n), n
        except OSError as e:
            errors.append(str(e))
    return None, "; ".join(errors)



def _check_vendor(vendor):
    if vendor not in VENDORS:
        raise DriverError(f"unknown GPU vendor {vendor!r}; use one of {', '.join(VENDORS)}")



# --------------------------------------------------------------------------------------
# Runtime compilers (NVRTC, hiprtc)
# --------------------------------------------------------------------------------------

def _search_dirs():
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:     # some virtualenvs' site module lacks it
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p]
    seen, out = set(), []
    for d in dirs:
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            out.append(d)
    return out


def _library_candidates(names, subdirs, pattern):
    cands = list(names)
    for base in _search_dirs():
        for sub in subdirs:
            # Highest version first: libx.so.13 before libx.so.12.
            cands += sorted(glob.glob(os.path.join(base, sub, pattern)), reverse=True)
    return cands


_RTC_LOCK = threading.Lock()
_RTC_CACHE = {}


def _load_rtc(key, names, subdirs, pattern):
    with _RTC_LOCK:
        if key not in _RTC_CACHE:
            lib, _ = _load_first(_library_candidates(names, subdirs, pattern))
            _RTC_CACHE[key] = lib
        return _RTC_CACHE[key]


_NVRTC_NAMES = ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
_NVRTC_SUBDIRS = ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"]


def find_nvrtc():
    """The NVRTC library (a ``ctypes.CDLL``) or ``None``: tries ``libnvrtc.so`` and its
    versioned names on the library path, then the pip package ``nvidia-cuda-nvrtc``'s
    folders in site-packages and ``sys.path``, and ``$CUDA_HOME/lib64``. Example::

        if find_nvrtc() is None: print("pip install nvidia-cuda-nvrtc")
    """
    names = list(_NVRTC_NAMES)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            names += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")),
                            reverse=True)
    return _load_rtc("nvrtc", names, _NVRTC_SUBDIRS, "libnvrtc.so*")


def find_hiprtc():
    """The hiprtc library (a ``ctypes.CDLL``) or ``None``: ``libhiprtc.so`` on the library
    path or in ``/opt/rocm/lib``. Example::

        if find_hiprtc() is None: print("install ROCm's hiprtc")
    """
    names = ["libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6"]
    names += sorted(glob.glob("/opt/rocm*/lib/libhiprtc.so*"), reverse=True)
    return _load_rtc("hiprtc", names, [], "libhiprtc.so*")


def _rtc_compile(lib, prefix, source, name, options, binary_getters, label):
    # NVRTC and hiprtc have the same shape: create, compile, log, get code, destroy.
    def f(sym, argtypes, restype=c_int):
        fn = getattr(lib, prefix + sym)
        fn.argtypes, fn.restype = argtypes, restype
        return fn

    err_str = f("GetErrorString", [c_int], c_char_p)

    def check(code, sym):
        if code != 0:
            raise DriverError(f"{prefix}{sym} failed: "
                              f"{(err_str(code) or b'?').decode(errors='replace')}",
                              prefix + sym, code)

    prog = c_void_p()
    check(f("CreateProgram", [_P(c_void_p), c_char_p, c_char_p, c_int, c_void_p, c_void_p])(
        byref(prog), source.encode(), name.encode(), 0, None, None), "CreateProgram")
    try:
        opts = [o.encode() for o in options]
        argv = (c_char_p * max(len(opts), 1))(*opts)
        code = f("CompileProgram", [c_void_p, c_int, _P(c_char_p)])(prog, len(opts), argv)
        size = c_size_t()
        log = b""
        if f("GetProgramLogSize", [c_void_p, _P(c_size_t)])(prog, byref(size)) == 0:
            buf = ctypes.create_string_buffer(size.value + 1)
            if f("GetProgramLog", [c_void_p, c_char_p])(prog, buf) == 0:
                log = buf.value
        if code != 0:
            text = (err_str(code) or b"?").decode(errors="replace")
            raise DriverError(
                _failure_message(f"{prefix}CompileProgram ({label}, {' '.join(options)}) "
                                 f"failed: {text}", log.decode(errors="replace"),
                                 source, name), prefix + "CompileProgram", code)
        for size_sym, get_sym in binary_getters:
            if not hasattr(lib, prefix + size_sym):
                continue
            check(f(size_sym, [c_void_p, _P(c_size_t)])(prog, byref(size)), size_sym)
            out = ctypes.create_string_buffer(size.value)
            check(f(get_sym, [c_void_p, c_char_p])(prog, out), get_sym)
            return out.raw
        raise DriverError(f"{label} lacks {prefix}{binary_getters[0][1]}; update it")
    finally:
        f("DestroyProgram", [_P(c_void_p)])(byref(prog))


def _nvrtc_supported(lib):
    try:
        n = c_int()
        lib.nvrtcGetNumSupportedArchs.argtypes = [_P(c_int)]
        if lib.nvrtcGetNumSupportedArchs(byref(n)) != 0:
            return []
        archs = (c_int * n.value)()
        lib.nvrtcGetSupportedArchs.argtypes = [_P(c_int)]
        if lib.nvrtcGetSupportedArchs(archs) != 0:
            return []
        return list(archs)
    except AttributeError:
        return []


def _arch_number(arch):
    m = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", arch)
    if not m:
        raise DriverError(f"bad CUDA architecture {arch!r}; expected e.g. 'sm_90' or "
                          f"'compute_90'")
    return int(m.group(1))


def compile_source(source: str, vendor: str, arch: str, name: str = "kernel.cu",
                   options=()) -> bytes:
    """Compile kernel source for ``vendor`` and ``arch`` to a loadable image; needs no GPU.

    CUDA: NVRTC (``find_nvrtc``) with ``--gpu-architecture``, ``-default-device`` and
    ``--std=c++17``, giving a cubin for a real ``sm_XX`` (PTX for the newest architecture
    NVRTC knows when it predates ``arch``, and for a ``compute_XX``); else ``nvcc -cubin``.
    HIP: hiprtc with ``--offload-arch``, else ``clang -x hip --cuda-device-only``, giving a
    code object. ``options`` are extra compiler flags. Raises ``DriverError`` with the
    compiler's log and the failing source lines, or saying what to install. Example::

        cubin = compile_source(src, "cuda", "sm_90")
    """
    _check_vendor(vendor)
    options = list(options)
    if vendor == "cuda":
        number = _arch_number(arch)
        lib = find_nvrtc()
        if lib is not None:
            supported = _nvrtc_supported(lib)
            cubin = arch.startswith("sm_")
            target = arch
            if supported and number > max(supported):
                target, cubin = f"compute_{max(supported)}", False   # driver JITs the PTX
            getters = ([("GetCUBINSize", "GetCUBIN")] if cubin else
                       [("GetPTXSize", "GetPTX")])
            return _rtc_compile(lib, "nvrtc", source, name,
                                [f"--gpu-architecture={target}", "-default-device",
                                 "--std=c++17"] + options, getters, "NVRTC")
        nvcc = find_compiler("cuda")
        if nvcc is not None:
            kind = "-cubin" if arch.startswith("sm_") else "-ptx"
            return _run_compiler([nvcc, kind, f"-arch={arch}", "--std=c++17"] + options,
                                 source, _suffixed(name, ".cu"), "out.bin",
                                 f"nvcc ({arch})", binary=True)
        raise DriverError(
            "no CUDA compiler: NVRTC (libnvrtc.so, libnvrtc.so.13 / .12, or the pip "
            "package's nvidia/cu13/lib, nvidia/cuda_nvrtc/lib) could not be loaded and "
            "nvcc is not on PATH; pip install nvidia-cuda-nvrtc")
    lib = find_hiprtc()
    if lib is not None:
        return _rtc_compile(lib, "hiprtc", source, name,
                            [f"--offload-arch={arch}", "-O3"] + options,
                            [("GetCodeSize", "GetCode")], "hiprtc")
    clang = find_compiler("hip")
    if clang is not None:
        return _run_compiler([clang, "-x", "hip", f"--offload-arch={arch}",
                              "--cuda-device-only", "--no-gpu-bundle-output", "-O3"]
                             + options, source, _suffixed(name, ".hip"), "out.hsaco",
                             f"clang -x hip ({arch})", binary=True)
    raise DriverError("no HIP compiler: hiprtc (libhiprtc.so) could not be loaded and no "
                      "clang with the AMDGPU target was found; install ROCm (hiprtc) or "
                      "add /opt/rocm/lib to LD_LIBRARY_PATH")


# --------------------------------------------------------------------------------------
# Offline compilers and the compile-only check
# --------------------------------------------------------------------------------------

def _suffixed(name, suffix):
    base = os.path.basename(name) or "kernel"
    return base if base.endswith(suffix) else os.path.splitext(base)[0] + suffix


_HIP_CHECK_ARCH = "gfx942"


@functools.lru_cache(maxsize=None)
def _clang_has_amdgpu(path):
    # Listing the amdgcn target is not enough: an older clang lacks HIP device-only
    # compiles or the current gfx targets, so compile an empty kernel for the default one.
    with tempfile.TemporaryDirectory(prefix="schedlang-gpu-") as tmp:
        src = os.path.join(tmp, "probe.hip")
        with open(src, "w") as f:
            f.write('extern "C" __attribute__((global)) void probe() {}\n')
        try:
            r = subprocess.run([path, "-x", "hip", f"--offload-arch={_HIP_CHECK_ARCH}",
                                "--cuda-device-only", "-nogpulib", "-nogpuinc", "-S",
                                "-o", os.path.join(tmp, "probe.s"), src],
                               capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        return r.returncode == 0


@functools.lru_cache(maxsize=None)
def _find_compiler_cached(vendor, path_env):
    if vendor == "cuda":
        found = shutil.which("nvcc")
        if found:
            return found
        for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                     "/usr/local/cuda"):
            cand = home and os.path.join(home, "bin", "nvcc")
            if cand and os.access(cand, os.X_OK):
                return cand
        return None
    if vendor == "hip":
        cands = [os.environ.get("HIP_CLANG"), "/opt/rocm/llvm/bin/clang"]
        cands += [shutil.which(f"clang-{v}") for v in range(24, 13, -1)]
        cands.append(shutil.which("clang"))
        for c in cands:
            if c and os.access(c, os.X_OK) and _clang_has_amdgpu(c):
                return c
        return None
    if vendor == "metal":
        if sys.platform == "darwin" and shutil.which("xcrun"):
            r = subprocess.run(["xcrun", "-sdk", "macosx", "-f", "metal"],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip()
        return None
    raise DriverError(f"unknown GPU vendor {vendor!r}; use 'cuda', 'hip' or 'metal'")


def find_compiler(vendor: str) -> str | None:
    """The path of the offline compiler for ``vendor``, or ``None`` when none is installed:
    ``nvcc`` (PATH, ``$CUDA_HOME/bin``, ``/usr/local/cuda/bin``) for ``"cuda"``; a clang that
    compiles HIP for gfx942 (``$HIP_CLANG``, ROCm's, ``clang-NN``, ``clang``) for ``"hip"``; the
    Xcode ``metal`` compiler for ``"metal"``. Example::

        if find_compiler("cuda") is None: pytest.skip("nvcc is not installed")
    """
    return _find_compiler_cached(vendor, os.environ.get("PATH", ""))


def _source_excerpt(source, lines):
    src = source.splitlines()
    out = []
    for n in sorted(set(lines))[:8]:
        if 1 <= n <= len(src):
            out.append(f"{n:5} | {src[n - 1]}")
    return "\n".join(out)


def _failure_message(head, log, source, fname):
    # Quote the lines the compiler blames: nvcc/NVRTC "name(12): error", clang
    # "name:12:3: error", ptxas "name, line 12; error".
    pat = re.compile(rf"{re.escape(fname)}(?:\((\d+)\):|:(\d+):\d+:|, line (\d+);)"
                     rf"\s*(?:fatal )?error")
    lines = [int(a or b or c) for a, b, c in pat.findall(log)]
    msg = f"{head}\n{log.strip()}"
    excerpt = _source_excerpt(source, lines)
    if excerpt:
        msg += f"\nfailing source lines:\n{excerpt}"
    return msg


def _run_compiler(argv, source, fname, out_name, label, binary=False, extra_files=None):
    with tempfile.TemporaryDirectory(prefix="schedlang-gpu-") as tmp:
        src_path = os.path.join(tmp, fname)
        with open(src_path, "w") as f:
            f.write(source)
        for rel, text in (extra_files or {}).items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        out_path = os.path.join(tmp, out_name)
        # "{tmp}" in an argument names this temporary folder (where extra_files are).
        argv = [a.replace("{tmp}", tmp) for a in argv] + ["-o", out_path, src_path]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, cwd=tmp,
                               timeout=_COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise DriverError(f"{label} took over {_COMPILE_TIMEOUT_S} s") from None
        except OSError as e:
            raise DriverError(f"{label} could not be run: {e}") from None
        # Temporary paths in messages only obscure the file names.
        log = (r.stderr + r.stdout).replace(tmp + os.sep, "")
        if r.returncode != 0 or not os.path.exists(out_path):
            raise DriverError(_failure_message(f"{label} could not compile the source "
                                               f"(exit status {r.returncode}):",
                                               log, source, fname))
        with open(out_path, "rb") as f:
            data = f.read()
        return data if binary else data.decode(errors="replace")


# Stand-in for <hip/hip_runtime.h> for the compile-only check on machines without ROCm
# (clang's -nogpuinc): the keywords, built-in variables and the device functions generated
# kernels use, mapped onto clang's AMDGPU builtins.
_HIP_CHECK_HEADER = r"""#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((amdgpu_flat_work_group_size(1, __VA_ARGS__)))
struct __sl_uint3 { unsigned x, y, z; };
#define threadIdx (__sl_uint3{__builtin_amdgcn_workitem_id_x(), \
    __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z()})
#define blockIdx (__sl_uint3{__builtin_amdgcn_workgroup_id_x(), \
    __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z()})
#define blockDim (__sl_uint3{__builtin_amdgcn_workgroup_size_x(), \
    __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z()})
#define gridDim (__sl_uint3{ \
    __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(), \
    __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(), \
    __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z()})
__device__ inline void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
#define __SL_F1(n) __device__ inline float n##f(float x) { return __builtin_##n##f(x); } \
  __device__ inline double n(double x) { return __builtin_##n(x); }
#define __SL_F2(n) __device__ inline float n##f(float x, float y) { \
    return __builtin_##n##f(x, y); } \
  __device__ inline double n(double x, double y) { return __builtin_##n(x, y); }
#define __SL_EXT1(n) extern "C" __device__ float n##f(float); \
  extern "C" __device__ double n(double);
#define __SL_EXT2(n) extern "C" __device__ float n##f(float, float); \
  extern "C" __device__ double n(double, double);
__SL_F1(sqrt) __SL_F1(fabs) __SL_F1(floor) __SL_F1(ceil) __SL_F1(trunc) __SL_F1(round)
__SL_F1(rint) __SL_F2(fmin) __SL_F2(fmax) __SL_F2(copysign)
__SL_EXT1(exp) __SL_EXT1(exp2) __SL_EXT1(log) __SL_EXT1(log2) __SL_EXT1(sin) __SL_EXT1(cos)
__SL_EXT2(pow) __SL_EXT2(fmod)
__SL_EXT1(tanh) __SL_EXT1(erf) __SL_EXT1(tan) __SL_EXT1(asin) __SL_EXT1(acos)
__SL_EXT1(atan) __SL_EXT1(sinh) __SL_EXT1(cosh) __SL_EXT1(log10) __SL_EXT1(expm1)
__SL_EXT1(log1p) __SL_EXT1(cbrt) __SL_EXT2(atan2)
__device__ inline float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__device__ inline double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__device__ inline float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
__device__ inline double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
__device__ inline float __expf(float x) { return __builtin_expf(x); }
__device__ inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
__device__ inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
__device__ inline long long __double_as_longlong(double x) {
  return __builtin_bit_cast(long long, x); }
__device__ inline double __longlong_as_double(long long x) {
  return __builtin_bit_cast(double, x); }
#define __SL_MINMAX(T) __device__ inline T min(T a, T b) { return a < b ? a : b; } \
  __device__ inline T max(T a, T b) { return a > b ? a : b; }
__SL_MINMAX(int) __SL_MINMAX(unsigned) __SL_MINMAX(long long) __SL_MINMAX(unsigned long long)
__SL_MINMAX(float) __SL_MINMAX(double)
#define __SL_ATOMIC(T) __device__ inline T atomicAdd(T* p, T v) { \
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); }
__SL_ATOMIC(int) __SL_ATOMIC(unsigned) __SL_ATOMIC(unsigned long long) __SL_ATOMIC(float)
__SL_ATOMIC(double)
"""


def check_compiles(source: str, vendor: str, arch: str | None = None) -> str | None:
    """Compile kernel source offline, without a GPU, to check generated code.

    ``"cuda"``: ``nvcc -ptx`` for ``arch`` (default ``sm_80``), then ``ptxas`` on the PTX
    (when installed next to nvcc or on PATH); returns the PTX. ``"hip"``: clang ``-x hip
    --cuda-device-only -nogpulib -nogpuinc`` to AMDGPU assembly for ``arch`` (default
    ``gfx942``; the full backend runs, no linker is needed), with a small stand-in for
    ``<hip/hip_runtime.h>``; returns the assembly. ``"metal"``: ``xcrun metal -c``.
    Returns ``None`` when the compiler is not installed (the caller skips); raises
    ``DriverError`` with the compiler's messages and the failing source lines. Example::

        ptx = check_compiles(src, "cuda")
        if ptx is None: pytest.skip("nvcc is not installed")
    """
    compiler = find_compiler(vendor)
    if compiler is None:
        return None
    if vendor == "cuda":
        arch = arch or "sm_80"
        _arch_number(arch)
        virtual = "compute_" + arch.split("_", 1)[1]
        ptx = _run_compiler([compiler, "-ptx", f"-arch={virtual}", "--std=c++17"], source,
                            "kernel.cu", "kernel.ptx", f"nvcc ({arch})")
        ptxas = os.path.join(os.path.dirname(compiler), "ptxas")
        ptxas = ptxas if os.access(ptxas, os.X_OK) else shutil.which("ptxas")
        if ptxas is not None and arch.startswith("sm_"):
            _run_compiler([ptxas, f"-arch={arch}"], ptx, "kernel.ptx", "kernel.cubin",
                          f"ptxas ({arch}) on nvcc's PTX", binary=True)
        return ptx
    if vendor == "hip":
        arch = arch or _HIP_CHECK_ARCH
        return _run_compiler([compiler, "-x", "hip", f"--offload-arch={arch}",
                              "--cuda-device-only", "-nogpulib", "-nogpuinc", "-O3",
                              "-I{tmp}/include", "-include", "hip/hip_runtime.h", "-S"],
                             source, "kernel.hip", "kernel.s", f"clang -x hip ({arch})",
                             extra_files={"include/hip/hip_runtime.h": _HIP_CHECK_HEADER})
    _run_compiler(["xcrun", "-sdk", "macosx", "metal", "-c"], source, "kernel.metal",
                  "kernel.air", "metal", binary=True)
    return "compiled with metal -c"
