"""A pipeline compiled for a GPU target (cuda, hip, metal): the rendered source, and a
``call`` with the same contract as the CPU module's, so ``Kernel`` checks arguments the
same way for every target. On a machine with the vendor's driver and a device, a call
copies the inputs to the device, runs the host statements (sizes, device allocations,
kernel launches in order) and copies the outputs back. Without one (CI, a laptop), or with
``SCHEDLANG_GPU=emulate``, the same loop IR runs in the CPU emulator: every block's
phases one after the other, which computes what the GPU computes.
Example: ``compile_gpu(stmt, args, "sl_C", "cuda", shapes).source``.
"""
from __future__ import annotations

import os
import re
import threading
import warnings

import numpy as np

from ..algo import types as T
from ..algo.evaluate import Unbound, evaluate
from ..errors import ArgumentError, CompileError, OutOfMemoryError
from ..lower import ir
from ..lower.gpu_kernels import emulation_stmt
from .cstyle import HALF_TYPES, render_kernels

_ARCH = {"cuda": re.compile(r"sm_[1-9]\d{1,2}[af]?$"), "hip": re.compile(r"gfx[0-9a-f]+$")}
_EXAMPLE = {"cuda": "cuda:sm_90", "hip": "hip:gfx942"}
MAX_GRID = (2 ** 31 - 1, 65535, 65535)


def check_gpu_target(target):
    """Refuse a malformed GPU target: ``cuda[:sm_XX]``, ``hip[:gfxNNN]`` or ``metal``."""
    base, _, arch = target.partition(":")
    if not arch and ":" not in target:
        return
    if base == "metal":
        raise CompileError(f"target {target!r}: metal takes no architecture; use 'metal'")
    if not _ARCH[base].match(arch):
        raise CompileError(f"target {target!r}: {arch!r} is not a {base} architecture; use "
                           f"'{base}' (the device's own) or e.g. '{_EXAMPLE[base]}'")


def _language(base):
    if base == "cuda":
        from .cuda import CUDA
        return CUDA
    if base == "hip":
        from .hip import HIP
        return HIP
    from .metal import METAL
    return METAL


def compile_gpu(stmt, args, name, target, shapes, inputs):
    """Render ``stmt`` (host statements around GpuKernels) for ``target``; ``shapes``: each
    buffer argument's shape (Exprs of the size arguments); ``inputs``: the names of the
    buffers the kernel reads (the others it writes)."""
    base, _, arch = target.partition(":")
    source, kernels = render_kernels(stmt, args, name, _language(base))
    return GpuModule(stmt, args, name, source, kernels, base, arch or None, shapes,
                     frozenset(inputs))


_WARNED = set()


class GpuModule:
    """``source`` (CUDA C / HIP C / Metal SL), ``kernels`` (KernelInfo), and ``call``."""

    from_cache = False

    def __init__(self, stmt, args, name, source, kernels, vendor, arch, shapes, inputs):
        self.stmt, self.args, self.name, self.source = stmt, args, name, source
        self.kernels, self.vendor, self.arch, self.shapes = kernels, vendor, arch, shapes
        self.inputs = inputs
        self.cannot_run = None
        self._emulator = None
        self._device = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ where it runs
    @property
    def runs_on(self):
        """``"<vendor> device <name>"``, or ``"emulator"`` when calls run on the CPU."""
        driver = self._driver()
        return "emulator" if driver is None else f"{self.vendor} device {driver.name}"

    def _driver(self):
        if os.environ.get("SCHEDLANG_GPU", "") == "emulate" or self.vendor == "metal":
            return None
        from .gpu_driver import GpuDriver
        if not GpuDriver.available(self.vendor):
            return None
        return GpuDriver.get(self.vendor)

    @property
    def assembly(self):
        """The device assembly: PTX for CUDA (NVRTC or nvcc, no GPU needed), AMDGPU
        assembly for HIP (clang); for the target's architecture, else the device's, else
        sm_80 / gfx942. Example: ``print(kern.assembly)``."""
        from .gpu_compilers import check_compiles, compile_source
        if self.vendor == "metal":
            raise CompileError("Metal assembly needs Apple's metal compiler (macOS); "
                               "kern.source holds the Metal Shading Language")
        driver = self._driver()
        arch = self.arch or (driver.arch if driver is not None else None)
        if self.vendor == "cuda":
            virtual = "compute_" + (arch or "sm_80").split("_", 1)[1]
            ptx = compile_source(self.source, "cuda", virtual, name=self.name + ".cu")
            return ptx.decode("utf-8", "replace").rstrip("\x00")
        text = check_compiles(self.source, "hip", arch)
        if text is None:
            raise CompileError("no clang with the AMDGPU target here to show HIP assembly "
                               "(apt-get install clang-19, or install ROCm)")
        return text

    @property
    def entry(self):
        return self.call

    def call(self, argv, nthreads):
        """Run on the uint64 argument array ``argv``; returns 0 or an Assert code."""
        driver = self._driver()
        if driver is None:
            return self._emulate(argv, nthreads)
        return self._run_on_device(driver, argv)

    # ------------------------------------------------------------------ emulator
    def _emulate(self, argv, nthreads):
        if self._emulator is None:
            key = (self.vendor, os.environ.get("SCHEDLANG_GPU", ""))
            if key not in _WARNED and os.environ.get("SCHEDLANG_GPU", "") != "emulate":
                _WARNED.add(key)
                warnings.warn(f"no {self.vendor} device here: kernels compiled for {self.vendor} "
                              "run in the CPU emulator (the GPU's results, not its speed)",
                              RuntimeWarning, stacklevel=4)
            from .llvm import compile_llvm
            self._emulator = compile_llvm(emulation_stmt(self.stmt), self.args,
                                          self.name + "_emulated", "llvm")
        return self._emulator.call(argv, nthreads)

    # ------------------------------------------------------------------ device
    def _loaded(self, driver):
        if self._device is None:
            image = driver.compile(self.source, self.arch, name=self.name + _SUFFIX[self.vendor])
            module = driver.load(image)
            fns = {k.symbol: module.function(k.symbol) for k in self.kernels}
            self._device = (image, module, fns)
        return self._device

    def _run_on_device(self, driver, argv):
        call = DeviceCall(self, driver, argv)
        try:
            rc = call.run()
            if not rc:
                call.copy_back()
            return rc
        finally:
            call.release()

    def device_call(self, argv):
        """A ``DeviceCall`` holding this call's arguments on the device (inputs copied once),
        for timing only the kernels; None when calls run in the emulator."""
        driver = self._driver()
        return None if driver is None else DeviceCall(self, driver, argv)


class DeviceCall:
    """One call's arguments on the device: ``run()`` runs the host statements (the kernel
    launches), ``run_timed()`` does so between device events and returns seconds,
    ``copy_back()`` copies the outputs to the caller's arrays, ``release()`` frees."""

    def __init__(self, module, driver, argv):
        self.module, self.driver = module, driver
        self.fns = module._loaded(driver)[2]
        self.env, self.host, self.bufs = {}, {}, {}
        raw = np.ctypeslib.as_array(argv).view(np.uint8) if not isinstance(argv, np.ndarray) \
            else argv.view(np.uint8)
        for i, a in enumerate(module.args):
            if a.kind == "scalar":
                self.env[a.name] = _scalar_value(a.dtype, raw[8 * i: 8 * i + 8])
        try:
            for i, a in enumerate(module.args):
                if a.kind != "buffer":
                    continue
                count = 1
                for x in module.shapes[a.name]:
                    count *= int(evaluate(x, self.env))
                ptr, nbytes = int(argv[i]), count * _storage_bytes(a.dtype)
                self.host[a.name] = (ptr, nbytes)
                self.bufs[a.name] = device_alloc(driver, nbytes, f"the array {a.name}")
                if a.name in module.inputs:
                    driver.to_device(self.bufs[a.name], ptr, nbytes)
        except BaseException:
            self.release()
            raise

    def run(self):
        with self.module._lock:
            rc = _Host(self.driver, self.fns, self.module.kernels, self.bufs).run(
                self.module.stmt, self.env)
            self.driver.synchronize()
            return rc

    def run_timed(self):
        """Seconds of device time the kernels of one call take (no copies)."""
        rc = []
        ms = self.driver.time_ms(lambda: rc.append(_Host(
            self.driver, self.fns, self.module.kernels, self.bufs).run(self.module.stmt,
                                                                        self.env)))
        return ms * 1e-3, rc[0]

    def copy_back(self):
        for name, (ptr, nbytes) in self.host.items():
            if name not in self.module.inputs:
                self.driver.to_host(ptr, self.bufs[name], nbytes)

    def release(self):
        for b in self.bufs.values():
            b.release()
        self.bufs = {}


_SUFFIX = {"cuda": ".cu", "hip": ".hip", "metal": ".metal"}


# the driver's status for an allocation larger than the free device memory (CUDA and HIP)
OUT_OF_MEMORY = 2


def device_alloc(driver, nbytes, what):
    """``driver.alloc(nbytes)``; memory the device does not have is an OutOfMemoryError
    naming ``what`` needed it (as on the CPU), not a driver failure."""
    from .gpu_driver import DriverError
    try:
        return driver.alloc(nbytes)
    except DriverError as e:
        if getattr(e, "code", None) != OUT_OF_MEMORY:
            raise
        raise OutOfMemoryError(f"{what} needs {nbytes} bytes of memory on the "
                               f"{driver.name}, more than it has free; pass smaller inputs, "
                               "or compute large Funcs in pieces (compute_at inside a loop "
                               "of their consumer)") from None


def _storage_bytes(dtype):
    return 2 if dtype.element() in HALF_TYPES else dtype.element().bytes


def _scalar_value(dtype, raw8):
    dt = dtype.element()
    if dt == T.bfloat16:
        bits = int(np.frombuffer(raw8[:2].tobytes(), np.uint16)[0])
        return float(np.frombuffer(np.uint32(bits << 16).tobytes(), np.float32)[0])
    v = np.frombuffer(raw8[:dt.numpy.itemsize].tobytes(), dt.numpy)[0]
    return v.item()


_KIND = {"bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
         "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float32": "f32",
         "float64": "f64", "float16": "f32", "bfloat16": "f32"}


class _Host:
    """Runs the host statements: lets, loops, device allocations and kernel launches."""

    def __init__(self, driver, fns, kernels, bufs):
        self.driver, self.fns, self.bufs = driver, fns, bufs
        self.info = {id(k.node): k for k in kernels}

    def run(self, s, env):
        if s is None:
            return 0
        if isinstance(s, ir.Block):
            for c in s.stmts:
                rc = self.run(c, env)
                if rc:
                    return rc
            return 0
        if isinstance(s, ir.LetStmt):
            env = dict(env)
            env[s.var] = evaluate(s.value, env)
            return self.run(s.body, env)
        if isinstance(s, ir.For):
            lo, n = int(evaluate(s.min, env)), int(evaluate(s.extent, env))
            for v in range(lo, lo + n):
                rc = self.run(s.body, {**env, s.var: v})
                if rc:
                    return rc
            return 0
        if isinstance(s, ir.IfThenElse):
            return self.run(s.then if evaluate(s.cond, env) else s.else_, env)
        if isinstance(s, ir.Allocate):
            count = 1
            for x in s.extents:
                count *= max(int(evaluate(x, env)), 0)
            self.bufs[s.buffer] = device_alloc(self.driver, count * _storage_bytes(s.dtype),
                                               f"the storage of {s.buffer}")
            try:
                return self.run(s.body, env)
            finally:
                self.bufs.pop(s.buffer).release()
        if isinstance(s, ir.GpuKernel):
            return self.launch(self.info[id(s)], env)
        raise CompileError(f"the host cannot run a {type(s).__name__} statement; this is a "
                           "schedlang bug, please report it")

    def launch(self, k, env):
        grid = [1, 1, 1]
        node, inner_env = k.node.body, dict(env)
        while isinstance(node, (ir.For, ir.LetStmt)):
            if isinstance(node, ir.For):
                if node.kind != "gpu_block":
                    break
                grid[node.gpu_dim] = int(evaluate(node.extent, inner_env))
            else:
                try:    # a let between block loops that a later extent may read
                    inner_env[node.var] = evaluate(node.value, inner_env)
                except Unbound:
                    pass    # it depends on a block index, so no extent reads it
            node = node.body
        if min(grid) <= 0:
            return 0
        for d in range(3):
            if grid[d] > MAX_GRID[d]:
                raise ArgumentError(f"these sizes need {grid[d]} blocks along {'xyz'[d]}, more "
                                    f"than a GPU grid holds ({MAX_GRID[d]}); bind a smaller "
                                    "extent to that gpu_blocks loop (split it first)")
        params = []
        for name, kind, dtype in k.params:
            if kind == "buffer":
                params.append(("ptr", self.bufs[name].ptr))
            else:
                params.append((_KIND[dtype.element().name], env[name]))
        status = None
        if k.status:
            status = self.driver.alloc(4)
            zero = np.zeros(1, np.int32)
            self.driver.to_device(status, zero.ctypes.data, 4)
            params.append(("ptr", status.ptr))
        try:
            self.driver.launch(self.fns[k.symbol], tuple(grid), tuple(k.threads), params)
            if status is not None:
                out = np.zeros(1, np.int32)
                self.driver.to_host(out.ctypes.data, status, 4)
                return int(out[0])
        finally:
            if status is not None:
                status.release()
        return 0

