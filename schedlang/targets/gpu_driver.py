"""The GPU driver runtime: load a vendor's driver library with ctypes, compile kernel source
to a loadable image, load it, move memory and launch kernels.

One class serves CUDA (``libcuda.so.1``, ``cu*``) and HIP (``libamdhip64.so``, ``hip*``):
each vendor is a table of the driver calls used, with their ctypes signatures, so the code
above the table is shared. Source is compiled by the vendor's runtime compiler library
(NVRTC / hiprtc) when one loads, else by its command-line compiler (``nvcc`` / ``clang``).
``check_compiles`` compiles source without a GPU (``nvcc`` + ``ptxas``, or ``clang -x hip``)
so tests can check generated code on machines that have only the compilers. Example::

    drv = GpuDriver.get("cuda")
    fn = drv.load(drv.compile(src)).function("add")
    a = drv.alloc(host.nbytes); drv.to_device(a, host.ctypes.data, host.nbytes)
    drv.launch(fn, (blocks, 1, 1), (256, 1, 1), [("ptr", a.ptr), ("i64", host.size)])
    drv.synchronize(); drv.to_host(host.ctypes.data, a, host.nbytes)
"""
from __future__ import annotations

import ctypes
import os
import re
import struct
import sys
import threading
import weakref
from ctypes import (POINTER, byref, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint64,
                    c_ubyte, c_void_p)

from ..errors import ArgumentError

from .gpu_compilers import (_LABEL, DriverError, _check_vendor,  # noqa: F401
                            _load_first, check_compiles, compile_source, find_compiler,
                            find_hiprtc, find_nvrtc)

__all__ = ["DriverError", "GpuDriver", "GpuModule", "GpuFunction", "DeviceBuffer",
           "KernelParams", "pack_kernel_params", "compile_source", "check_compiles",
           "find_compiler", "find_nvrtc", "find_hiprtc", "SCALAR_KINDS"]

_COMPILE_TIMEOUT_S = 300


# --------------------------------------------------------------------------------------
# Kernel arguments
# --------------------------------------------------------------------------------------

# kind -> (ctypes type the kernel reads, integer range or None for floats).
SCALAR_KINDS = {
    "ptr": (c_uint64, (0, 2**64 - 1)),
    "i8": (ctypes.c_int8, (-2**7, 2**7 - 1)),
    "i16": (ctypes.c_int16, (-2**15, 2**15 - 1)),
    "i32": (ctypes.c_int32, (-2**31, 2**31 - 1)),
    "i64": (ctypes.c_int64, (-2**63, 2**63 - 1)),
    "u8": (ctypes.c_uint8, (0, 2**8 - 1)),
    "u16": (ctypes.c_uint16, (0, 2**16 - 1)),
    "u32": (ctypes.c_uint32, (0, 2**32 - 1)),
    "u64": (ctypes.c_uint64, (0, 2**64 - 1)),
    "bool": (ctypes.c_uint8, (0, 1)),
    "f16": (ctypes.c_uint16, None),     # IEEE half, passed as its 16 bits
    "bf16": (ctypes.c_uint16, None),    # bfloat16, passed as its 16 bits
    "f32": (ctypes.c_float, None),
    "f64": (ctypes.c_double, None),
}


def _bf16_bits(x: float) -> int:
    # Round to nearest even from the float32 bits, as the device's conversion does.
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40          # keep NaN a quiet NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class KernelParams:
    """The ``void** kernelParams`` array of a launch and the argument values it points at.

    ``array`` is a ctypes ``c_void_p`` array whose i-th entry is the address of the i-th
    argument's value (``values[i]``, a ctypes scalar); keep this object alive until the
    launch call returns. ``pointer`` is what the launch call takes (``None`` for no
    arguments). Example::

        p = pack_kernel_params([("ptr", buf.ptr), ("i32", 7)])
        ctypes.cast(p.array[1], ctypes.POINTER(ctypes.c_int32))[0]   # 7
    """

    def __init__(self, values: list):
        self.values = values
        self.array = (c_void_p * max(len(values), 1))(
            *[ctypes.addressof(v) for v in values])

    @property
    def pointer(self):
        return self.array if self.values else None

    def __len__(self):
        return len(self.values)


def pack_kernel_params(args) -> KernelParams:
    """Build the ``kernelParams`` array for a launch from ``(kind, value)`` pairs.

    Kinds are ``"ptr"`` (a device address, or anything with a ``.ptr`` such as a
    ``DeviceBuffer``), the integers ``i8 i16 i32 i64 u8 u16 u32 u64``, ``"bool"`` (one
    byte), and the floats ``f16 bf16 f32 f64``; an integer out of its kind's range, or an
    unknown kind, raises ``ArgumentError`` rather than being truncated silently. Example::

        p = pack_kernel_params([("ptr", 0x7f0000000000), ("i64", 1 << 40), ("f32", 0.5),
                                ("bool", True)])
        drv.launch(fn, grid, block, ...)  # launch() calls this itself
    """
    values = []
    for i, arg in enumerate(args):
        try:
            kind, value = arg
        except (TypeError, ValueError):
            raise ArgumentError(f"kernel argument {i}: expected a (kind, value) pair, "
                                f"got {arg!r}") from None
        if kind not in SCALAR_KINDS:
            raise ArgumentError(f"kernel argument {i}: unknown kind {kind!r}; use one of "
                                f"{', '.join(SCALAR_KINDS)}")
        ctype, bounds = SCALAR_KINDS[kind]
        if kind == "ptr" and hasattr(value, "ptr"):
            value = value.ptr
        if kind == "f16":
            value = struct.unpack("<H", struct.pack("<e", float(value)))[0]
        elif kind == "bf16":
            value = _bf16_bits(float(value))
        elif bounds is not None:
            if isinstance(value, float) or not hasattr(value, "__index__"):
                raise ArgumentError(f"kernel argument {i} ({kind}): expected an integer, "
                                    f"got {value!r}")
            value = int(value)
            if not bounds[0] <= value <= bounds[1]:
                raise ArgumentError(f"kernel argument {i} ({kind}): {value} is outside "
                                    f"[{bounds[0]}, {bounds[1]}]")
        else:
            value = float(value)
        values.append(ctype(value))
    return KernelParams(values)


# --------------------------------------------------------------------------------------
# Driver tables: logical call -> (symbol names to try, argtypes). Every call returns a
# status (CUresult / hipError_t), so the restype is always c_int.
# --------------------------------------------------------------------------------------

_P = POINTER
_LAUNCH_ARGS = [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p,
                _P(c_void_p), _P(c_void_p)]

_CUDA_TABLE = {
    "init": (("cuInit",), [c_uint]),
    "device_count": (("cuDeviceGetCount",), [_P(c_int)]),
    "device_get": (("cuDeviceGet",), [_P(c_int), c_int]),
    "device_name": (("cuDeviceGetName",), [c_char_p, c_int, c_int]),
    "device_attribute": (("cuDeviceGetAttribute",), [_P(c_int), c_int, c_int]),
    "primary_ctx_retain": (("cuDevicePrimaryCtxRetain",), [_P(c_void_p), c_int]),
    "ctx_set_current": (("cuCtxSetCurrent",), [c_void_p]),
    "module_load": (("cuModuleLoadData",), [_P(c_void_p), c_char_p]),
    "module_unload": (("cuModuleUnload",), [c_void_p]),
    "module_function": (("cuModuleGetFunction",), [_P(c_void_p), c_void_p, c_char_p]),
    "func_set_attribute": (("cuFuncSetAttribute",), [c_void_p, c_int, c_int]),
    "launch": (("cuLaunchKernel",), _LAUNCH_ARGS),
    "malloc": (("cuMemAlloc_v2",), [_P(c_uint64), c_size_t]),
    "free": (("cuMemFree_v2",), [c_uint64]),
    "htod": (("cuMemcpyHtoD_v2",), [c_uint64, c_void_p, c_size_t]),
    "dtoh": (("cuMemcpyDtoH_v2",), [c_void_p, c_uint64, c_size_t]),
    "memset8": (("cuMemsetD8_v2",), [c_uint64, c_ubyte, c_size_t]),
    "synchronize": (("cuCtxSynchronize",), []),
    "event_create": (("cuEventCreate",), [_P(c_void_p), c_uint]),
    "event_record": (("cuEventRecord",), [c_void_p, c_void_p]),
    "event_synchronize": (("cuEventSynchronize",), [c_void_p]),
    # CUDA 13 headers map the name to _v2; older drivers have only the plain symbol.
    "event_elapsed": (("cuEventElapsedTime_v2", "cuEventElapsedTime"),
                      [_P(c_float), c_void_p, c_void_p]),
    "event_destroy": (("cuEventDestroy_v2", "cuEventDestroy"), [c_void_p]),
    "error_name": (("cuGetErrorName",), [c_int, _P(c_char_p)]),
    "error_string": (("cuGetErrorString",), [c_int, _P(c_char_p)]),
}

_HIP_TABLE = {
    "init": (("hipInit",), [c_uint]),
    "device_count": (("hipGetDeviceCount",), [_P(c_int)]),
    "device_get": (("hipDeviceGet",), [_P(c_int), c_int]),
    "device_name": (("hipDeviceGetName",), [c_char_p, c_int, c_int]),
    "set_device": (("hipSetDevice",), [c_int]),
    # ROCm 6 renamed the struct's layout version into the symbol; the scan for the arch
    # name in get_arch does not depend on the layout.
    "device_properties": (("hipGetDevicePropertiesR0600", "hipGetDeviceProperties"),
                          [c_void_p, c_int]),
    "module_load": (("hipModuleLoadData",), [_P(c_void_p), c_char_p]),
    "module_unload": (("hipModuleUnload",), [c_void_p]),
    "module_function": (("hipModuleGetFunction",), [_P(c_void_p), c_void_p, c_char_p]),
    "launch": (("hipModuleLaunchKernel",), _LAUNCH_ARGS),
    "malloc": (("hipMalloc",), [_P(c_uint64), c_size_t]),
    "free": (("hipFree",), [c_uint64]),
    "htod": (("hipMemcpyHtoD",), [c_uint64, c_void_p, c_size_t]),
    "dtoh": (("hipMemcpyDtoH",), [c_void_p, c_uint64, c_size_t]),
    "memset8": (("hipMemsetD8",), [c_uint64, c_ubyte, c_size_t]),
    "synchronize": (("hipDeviceSynchronize",), []),
    "event_create": (("hipEventCreateWithFlags",), [_P(c_void_p), c_uint]),
    "event_record": (("hipEventRecord",), [c_void_p, c_void_p]),
    "event_synchronize": (("hipEventSynchronize",), [c_void_p]),
    "event_elapsed": (("hipEventElapsedTime",), [_P(c_float), c_void_p, c_void_p]),
    "event_destroy": (("hipEventDestroy",), [c_void_p]),
}

_LIBRARIES = {
    "cuda": ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"],
    "hip": ["amdhip64.dll"] if sys.platform == "win32" else
           ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
            "/opt/rocm/lib/libamdhip64.so"],
}
_INSTALL_HINT = {
    "cuda": "install the NVIDIA driver (nvidia-smi should list the GPU), or compile for "
            "the CPU target ('llvm') instead",
    "hip": "install ROCm (rocminfo should list the GPU) or add its lib folder to "
           "LD_LIBRARY_PATH, or compile for the CPU target ('llvm') instead",
}

_CU_ATTR_CC_MAJOR, _CU_ATTR_CC_MINOR = 75, 76
_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED = 8
_DEFAULT_SHARED_LIMIT = 48 * 1024   # CUDA needs an opt-in for more dynamic shared memory


def _bind(lib, table):
    # A call missing from the library stays absent; using it raises a clear error.
    fns = {}
    for op, (symbols, argtypes) in table.items():
        for sym in symbols:
            f = getattr(lib, sym, None)
            if f is not None:
                f.argtypes, f.restype = argtypes, c_int
                fns[op] = (f, sym)
                break
    return fns


class DeviceBuffer:
    """Device memory from ``GpuDriver.alloc``: ``ptr`` is its device address (an int) and
    ``nbytes`` its size; ``release()`` frees it (again is a no-op), as does garbage
    collection. Usable as a context manager. Example::

        with drv.alloc(4096) as buf:
            drv.to_device(buf, host.ctypes.data, 4096)
    """

    def __init__(self, driver: "GpuDriver", ptr: int, nbytes: int):
        self.driver, self.ptr, self.nbytes = driver, ptr, nbytes
        self._pid = os.getpid()

    def release(self):
        ptr, self.ptr = self.ptr, 0
        # A forked child does not own the parent's device memory.
        if ptr and self._pid == os.getpid():
            self.driver._free(ptr)

    def __del__(self):
        try:
            self.release()
        except Exception:      # interpreter shutdown or a context lost to a kernel fault
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"DeviceBuffer(ptr=0x{self.ptr:x}, nbytes={self.nbytes})"


class GpuFunction:
    """A kernel entry point of a loaded ``GpuModule``, passed to ``GpuDriver.launch``; it
    keeps its module loaded. Example::

        fn = drv.load(image).function("add")
        drv.launch(fn, (4, 1, 1), (256, 1, 1), [("ptr", a.ptr), ("i64", 1024)])
    """

    def __init__(self, module: "GpuModule", handle: int, name: str):
        self.module, self.handle, self.name = module, handle, name
        self.dynamic_shared_limit = _DEFAULT_SHARED_LIMIT

    def __repr__(self):
        return f"GpuFunction({self.name!r})"


class GpuModule:
    """A compiled image loaded on the device; ``function(name)`` looks up a kernel (the
    name is the symbol, so kernels are best declared ``extern "C"``). Unloaded by
    ``release()`` or garbage collection once no ``GpuFunction`` of it is alive. Example::

        mod = drv.load(drv.compile(src))
        add = mod.function("add")
    """

    def __init__(self, driver: "GpuDriver", handle: int):
        self.driver, self.handle = driver, handle
        # Weak, so a module is unloaded once neither it nor any of its functions is used.
        self._functions = weakref.WeakValueDictionary()
        self._pid = os.getpid()

    def function(self, name: str) -> GpuFunction:
        fn = self._functions.get(name)
        if fn is None:
            if not self.handle:
                raise DriverError(f"function({name!r}) on a released module")
            d = self.driver
            d._make_current()
            h = c_void_p()
            d._call("module_function", byref(h), c_void_p(self.handle), name.encode(),
                    what=f"kernel {name!r}")
            fn = self._functions[name] = GpuFunction(self, h.value, name)
        return fn

    def release(self):
        h, self.handle = self.handle, 0
        self._functions.clear()
        if h and self._pid == os.getpid():
            self.driver._make_current()
            self.driver._call("module_unload", c_void_p(h))

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


class GpuDriver:
    """One vendor's driver API on one device, described by a table of driver calls: CUDA
    (``libcuda.so.1``; the device's primary context, made current in every method so any
    thread may call) or HIP (``libamdhip64.so``; ``hipSetDevice`` in every method).
    ``get(vendor)`` gives the process-wide instance; ``name`` is the device's name and
    ``arch`` its compiler target (``"sm_90"``, ``"gfx942"``). Example::

        drv = GpuDriver.get("cuda")
        fn = drv.load(drv.compile(src)).function("add")
        buf = drv.alloc(n * 4)
        drv.launch(fn, ((n + 255) // 256, 1, 1), (256, 1, 1), [("ptr", buf), ("i64", n)])
        ms = drv.time_ms(lambda: drv.launch(fn, ...))
    """

    _cache: dict = {}
    _cache_pid = None
    _cache_lock = threading.Lock()

    @classmethod
    def get(cls, vendor: str, device: int = 0) -> "GpuDriver":
        """The driver for ``vendor`` (``"cuda"`` or ``"hip"``) on device ``device``, opened
        once per process (a failure is remembered too, so a missing driver is not probed
        again). Raises ``DriverError`` saying what is missing and what to do. Example::

            drv = GpuDriver.get("cuda"); print(drv.name, drv.arch)
        """
        _check_vendor(vendor)
        key = (vendor, device)
        with cls._cache_lock:
            # A forked child cannot use its parent's driver state: open afresh.
            if cls._cache_pid != os.getpid():
                cls._cache, cls._cache_pid = {}, os.getpid()
            got = cls._cache.get(key)
            if got is None:
                try:
                    got = cls(vendor, device)
                except DriverError as e:
                    got = e
                cls._cache[key] = got
        if isinstance(got, DriverError):
            raise DriverError(str(got), got.call, got.code)
        return got

    @staticmethod
    def available(vendor: str, device: int = 0) -> bool:
        """Whether ``GpuDriver.get(vendor, device)`` succeeds; never raises. Example::

            if GpuDriver.available("cuda"): run_on_gpu()
        """
        try:
            GpuDriver.get(vendor, device)
            return True
        except Exception:
            return False

    def __init__(self, vendor: str, device: int = 0):
        _check_vendor(vendor)
        self.vendor, self.device_ordinal = vendor, device
        self.label = label = _LABEL[vendor]
        lib, found = _load_first(_LIBRARIES[vendor])
        if lib is None:
            raise DriverError(f"no {label} driver ({_LIBRARIES[vendor][0]}) could be "
                              f"loaded: {found}; {_INSTALL_HINT[vendor]}")
        self.library_name, self._lib = found, lib
        table = _CUDA_TABLE if vendor == "cuda" else _HIP_TABLE
        self._fns = _bind(lib, table)
        missing = sorted(table[op][0][0] for op in table if op not in self._fns
                         and op not in ("func_set_attribute", "error_name", "error_string",
                                        "device_properties"))
        if missing:
            raise DriverError(f"the {label} driver {found} lacks {', '.join(missing)}; "
                              f"it is too old: update it")
        if vendor == "hip":
            for sym in ("hipGetErrorName", "hipGetErrorString"):
                f = getattr(lib, sym, None)
                if f is not None:
                    f.argtypes, f.restype = [c_int], c_char_p
        hint = _INSTALL_HINT[vendor]
        self._call("init", 0, what=f"the {label} driver {found} loaded but could not "
                   f"start ({hint})")
        count = c_int()
        self._call("device_count", byref(count))
        if device >= count.value or device < 0:
            raise DriverError(f"no {label} device {device}: the driver sees "
                              f"{count.value} device(s); {hint}")
        dev = c_int()
        self._call("device_get", byref(dev), device)
        self._device = dev.value
        if vendor == "cuda":
            ctx = c_void_p()
            self._call("primary_ctx_retain", byref(ctx), self._device)
            self._ctx = ctx.value
        self._make_current()
        buf = ctypes.create_string_buffer(256)
        self._call("device_name", buf, len(buf), self._device)
        self.name = buf.value.decode(errors="replace")
        self.arch = self._get_arch()

    # --- plumbing ---------------------------------------------------------------------

    def _error_text(self, code):
        if self.vendor == "cuda":
            out = []
            for op in ("error_name", "error_string"):
                s = c_char_p()
                if op in self._fns and self._fns[op][0](code, byref(s)) == 0 and s.value:
                    out.append(s.value.decode(errors="replace"))
        else:
            out = []
            for sym in ("hipGetErrorName", "hipGetErrorString"):
                f = getattr(self._lib, sym, None)
                s = f(code) if f is not None else None
                if s:
                    out.append(s.decode(errors="replace"))
        if not out:
            return f"error {code}"
        return out[0] if len(out) == 1 or out[0] == out[1] else f"{out[0]} ({out[1]})"

    def _call(self, op, *args, what=None):
        fn, sym = self._fns[op]
        code = fn(*args)
        if code != 0:
            msg = f"{sym} failed: {self._error_text(code)}"
            raise DriverError(f"{what}: {msg}" if what else msg, sym, code)

    def _make_current(self):
        # Contexts / current devices are per thread: set ours before every call.
        if self.vendor == "cuda":
            self._call("ctx_set_current", c_void_p(self._ctx))
        else:
            self._call("set_device", self._device)

    def _get_arch(self):
        if self.vendor == "cuda":
            major, minor = c_int(), c_int()
            self._call("device_attribute", byref(major), _CU_ATTR_CC_MAJOR, self._device)
            self._call("device_attribute", byref(minor), _CU_ATTR_CC_MINOR, self._device)
            return f"sm_{major.value}{minor.value}"
        if "device_properties" not in self._fns:
            raise DriverError(f"the HIP driver {self.library_name} lacks "
                              f"hipGetDeviceProperties; update ROCm")
        # The struct's layout changes between ROCm versions; gcnArchName ("gfx942:sramecc+:
        # xnack-") follows the 256-byte name, so find it by content in an oversized buffer.
        props = ctypes.create_string_buffer(16384)
        self._call("device_properties", props, self._device)
        m = re.search(rb"gfx[0-9a-f]+", props.raw[256:])
        if not m:
            raise DriverError(f"could not find the gfx architecture of HIP device "
                              f"{self.device_ordinal} ({self.name})")
        return m.group().decode()

    def _free(self, ptr):
        self._make_current()
        self._call("free", c_uint64(ptr))

    @staticmethod
    def _device_ptr(buf):
        return buf.ptr if hasattr(buf, "ptr") else int(buf)

    # --- public API -------------------------------------------------------------------

    def compile(self, source: str, arch: str | None = None, name: str = "kernel.cu",
                options=()) -> bytes:
        """Compile kernel source to an image ``load`` accepts, for ``arch`` (default: this
        device's): see ``compile_source``. Raises ``DriverError`` with the compiler's log.
        Example::

            image = drv.compile('extern "C" __global__ void k(int* p) { *p = 1; }')
        """
        return compile_source(source, self.vendor, arch or self.arch, name, options)

    def load(self, image: bytes) -> GpuModule:
        """Load a compiled image (a cubin / PTX / HIP code object) as a ``GpuModule``.
        Example::

            fn = drv.load(drv.compile(src)).function("add")
        """
        if isinstance(image, str):
            image = image.encode()
        # PTX is loaded as a C string; an ELF image carries its own size.
        if not image.startswith(b"\x7fELF") and not image.endswith(b"\0"):
            image = image + b"\0"
        self._make_current()
        h = c_void_p()
        self._call("module_load", byref(h), image, what="loading the compiled module")
        return GpuModule(self, h.value)

    def alloc(self, nbytes: int) -> DeviceBuffer:
        """Allocate ``nbytes`` of device memory (0 allocates 1 byte, so every buffer has a
        distinct address). Example::

            buf = drv.alloc(a.nbytes)
        """
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ArgumentError(f"alloc: negative size {nbytes}")
        self._make_current()
        ptr = c_uint64()
        self._call("malloc", byref(ptr), max(nbytes, 1),
                   what=f"allocating {nbytes} bytes on {self.name}")
        return DeviceBuffer(self, ptr.value, nbytes)

    def _check_size(self, buf, nbytes, what):
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ArgumentError(f"{what}: negative size {nbytes}")
        if isinstance(buf, DeviceBuffer):
            if not buf.ptr:
                raise ArgumentError(f"{what}: the device buffer was released")
            if nbytes > buf.nbytes:
                raise ArgumentError(f"{what}: {nbytes} bytes do not fit the "
                                    f"{buf.nbytes}-byte device buffer")
        return nbytes

    def to_device(self, buf, host_ptr: int, nbytes: int):
        """Copy ``nbytes`` from host address ``host_ptr`` into ``buf`` (a ``DeviceBuffer``
        or device address), synchronously. Example::

            drv.to_device(buf, a.ctypes.data, a.nbytes)
        """
        nbytes = self._check_size(buf, nbytes, "to_device")
        if nbytes:
            self._make_current()
            self._call("htod", c_uint64(self._device_ptr(buf)), c_void_p(host_ptr), nbytes)

    def to_host(self, host_ptr: int, buf, nbytes: int):
        """Copy ``nbytes`` from ``buf`` (a ``DeviceBuffer`` or device address) to host
        address ``host_ptr``, synchronously (after the kernels before it finish). Example::

            drv.to_host(out.ctypes.data, buf, out.nbytes)
        """
        nbytes = self._check_size(buf, nbytes, "to_host")
        if nbytes:
            self._make_current()
            self._call("dtoh", c_void_p(host_ptr), c_uint64(self._device_ptr(buf)), nbytes)

    def memset(self, buf, value: int = 0, nbytes: int | None = None):
        """Set ``nbytes`` (default: all) bytes of ``buf`` to the byte ``value``. Example::

            drv.memset(buf, 0)
        """
        if nbytes is None:
            nbytes = buf.nbytes
        nbytes = self._check_size(buf, nbytes, "memset")
        if nbytes:
            self._make_current()
            self._call("memset8", c_uint64(self._device_ptr(buf)), int(value) & 0xFF, nbytes)

    def launch(self, fn: GpuFunction, grid, block, args, shared_bytes: int = 0):
        """Launch ``fn`` on the default stream over ``grid`` blocks of ``block`` threads
        (tuples of up to 3 positive ints) with ``shared_bytes`` of dynamic shared memory;
        ``args`` are ``(kind, value)`` pairs (see ``pack_kernel_params``). Asynchronous:
        errors in the kernel show at the next ``synchronize`` or copy. Example::

            drv.launch(fn, (n // 256, 1, 1), (256, 1, 1), [("ptr", a), ("i64", n)])
        """
        g, b = self._dims(grid, "grid"), self._dims(block, "block")
        params = pack_kernel_params(args)
        self._make_current()
        shared_bytes = int(shared_bytes)
        if (shared_bytes > fn.dynamic_shared_limit and "func_set_attribute" in self._fns):
            self._call("func_set_attribute", c_void_p(fn.handle),
                       _CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, shared_bytes,
                       what=f"allowing {shared_bytes} bytes of shared memory for {fn.name}")
            fn.dynamic_shared_limit = shared_bytes
        self._call("launch", c_void_p(fn.handle), *g, *b, shared_bytes, None,
                   params.pointer, None,
                   what=f"launching {fn.name} on grid {g}, block {b}, "
                        f"{shared_bytes} bytes of shared memory")

    @staticmethod
    def _dims(dims, what):
        dims = tuple(int(d) for d in dims)
        if not 1 <= len(dims) <= 3 or any(d < 1 or d >= 2**32 for d in dims):
            raise ArgumentError(f"launch: {what} {dims} must be 1 to 3 positive sizes")
        return dims + (1,) * (3 - len(dims))

    def synchronize(self):
        """Wait for all work on the device; raises ``DriverError`` if a kernel failed.
        Example::

            drv.launch(fn, grid, block, args); drv.synchronize()
        """
        self._make_current()
        self._call("synchronize", what="waiting for the device")

    def time_ms(self, fn_callable) -> float:
        """Milliseconds of device time between events recorded before and after calling
        ``fn_callable`` (which launches work on the default stream). Example::

            ms = drv.time_ms(lambda: drv.launch(fn, grid, block, args))
        """
        self._make_current()
        start, stop = c_void_p(), c_void_p()
        self._call("event_create", byref(start), 0)
        try:
            self._call("event_create", byref(stop), 0)
            try:
                self._call("event_record", start, None)
                fn_callable()
                self._make_current()   # the callable may have switched threads' context
                self._call("event_record", stop, None)
                self._call("event_synchronize", stop, what="waiting for the timed work")
                ms = c_float()
                self._call("event_elapsed", byref(ms), start, stop)
                return float(ms.value)
            finally:
                self._call("event_destroy", stop)
        finally:
            self._call("event_destroy", start)

    def __repr__(self):
        return f"GpuDriver({self.vendor!r}, name={self.name!r}, arch={self.arch!r})"

