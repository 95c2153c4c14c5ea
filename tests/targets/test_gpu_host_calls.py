"""The host side of a GPU call, checked without a GPU: a recording stand-in for the driver
sees the device allocations, copies and kernel launches a call makes (grid, block, the
kernel's parameters), in order. The real driver is exercised by test_gpu_driver.py and,
on a machine with a GPU, by every test in test_gpu_targets.py."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.targets import gpu_module


class _Buffer:
    def __init__(self, log, nbytes):
        self.ptr, self.nbytes, self.log = 0x1000 * (len(log) + 1), nbytes, log

    def release(self):
        self.log.append(("free", self.nbytes))


class _Function:
    def __init__(self, name):
        self.name = name


class _Module:
    def function(self, name):
        return _Function(name)


class RecordingDriver:
    name, arch = "recording", "sm_90"

    def __init__(self):
        self.log = []

    def compile(self, source, arch=None, name="kernel.cu"):
        self.log.append(("compile", name))
        return b"image"

    def load(self, image):
        return _Module()

    def alloc(self, nbytes):
        self.log.append(("alloc", nbytes))
        return _Buffer(self.log, nbytes)

    def to_device(self, buf, host_ptr, nbytes):
        self.log.append(("to_device", nbytes))

    def to_host(self, host_ptr, buf, nbytes):
        self.log.append(("to_host", nbytes))

    def launch(self, fn, grid, block, args):
        self.log.append(("launch", fn.name, grid, block, [k for k, _ in args]))

    def synchronize(self):
        self.log.append(("sync",))

    def time_ms(self, fn):
        fn()
        return 0.25


@pytest.fixture
def driver(monkeypatch):
    d = RecordingDriver()
    monkeypatch.setattr(gpu_module.GpuModule, "_driver", lambda self: d)
    return d


def _two_stage(tile=16):
    A = sl.Input("A", sl.float32, ("H", "W"))
    y, x = sl.vars("y x")
    g = sl.Func("g")
    g[y, x] = A[y, x] * 2
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = g[y, x] + 1
    s = sl.Schedule(f)
    s[g].compute_root().gpu_tile(y, x, tile, tile)
    s[f].gpu_tile(y, x, tile, tile)
    return A, f, s


def test_a_call_allocates_copies_launches_in_order_and_frees(driver):
    A, f, s = _two_stage()
    kern = sl.compile(f, s, target="cuda")
    a = np.ones((40, 70), np.float32)
    kern(A=a)
    launches = [e for e in driver.log if e[0] == "launch"]
    # g first, then f; grid (x blocks, y blocks, 1) over 70 x 40 in 16 x 16 tiles
    assert [e[2] for e in launches] == [(5, 3, 1), (5, 3, 1)]
    assert [e[3] for e in launches] == [(16, 16, 1), (16, 16, 1)]
    assert launches[0][1].endswith("kernel0") and launches[1][1].endswith("kernel1")
    nbytes = 40 * 70 * 4
    kinds = [e[0] for e in driver.log]
    assert kinds.index("to_device") < kinds.index("launch")
    assert ("to_device", nbytes) in driver.log and ("to_host", nbytes) in driver.log
    # A, f and g's intermediate storage, each freed
    assert sorted(e[1] for e in driver.log if e[0] == "alloc") == [nbytes] * 3
    assert sorted(e[1] for e in driver.log if e[0] == "free") == [nbytes] * 3
    # buffers first (f, g), then the sizes H, W and g's row length, as int64
    assert launches[1][4] == ["ptr", "ptr", "i64", "i64", "i64"]


def test_kernel_time_copies_once_and_reports_device_time(driver):
    A, f, s = _two_stage()
    kern = sl.compile(f, s, target="cuda")
    stats = kern.time(A=np.ones((16, 16), np.float32), warmup=1, repeats=4)
    assert stats.runs == 4 and stats.median == pytest.approx(0.25e-3)
    assert sum(1 for e in driver.log if e[0] == "to_device") == 1
    assert sum(1 for e in driver.log if e[0] == "to_host") == 0
    assert sum(1 for e in driver.log if e[0] == "launch") == 2 * 5


def test_a_grid_larger_than_the_device_takes_is_an_argument_error(driver):
    A = sl.Input("A", sl.float32, ("H", 4))
    y, x = sl.vars("y x")
    f = sl.Func("f", shape=(A.shape[0], A.shape[1]))
    f[y, x] = A[y, x]
    s = sl.Schedule(f)
    s[f].gpu_blocks(x, y)       # a block per element, rows on y: at most 65535 of them
    kern = sl.compile(f, s, target="cuda")
    with pytest.raises(sl.ArgumentError, match="70000 blocks along y"):
        kern(A=np.zeros((70000, 4), np.float32))


def test_device_memory_running_out_is_an_out_of_memory_error(driver, monkeypatch):
    from schedlang.targets.gpu_driver import DriverError

    def full(nbytes):
        raise DriverError("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)",
                          "cuMemAlloc_v2", 2)
    monkeypatch.setattr(driver, "alloc", full)
    A, f, s = _two_stage()
    kern = sl.compile(f, s, target="cuda")
    with pytest.raises(sl.OutOfMemoryError, match="the array A needs 4096 bytes of memory on "
                       "the recording"):
        kern(A=np.ones((32, 32), np.float32))


@pytest.mark.filterwarnings("ignore:no .* device here")
def test_kernel_assembly_is_ptx_or_amdgpu_assembly_for_the_targets_architecture():
    import shutil
    A, f, s = _two_stage()
    if shutil.which("nvcc") is not None:
        ptx = sl.compile(f, s, target="cuda:sm_90").assembly
        assert ".target sm_90" in ptx and ".entry sl_f_kernel1" in ptx
    from schedlang.targets.gpu_compilers import find_compiler
    if find_compiler("hip") is not None:
        asm = sl.compile(f, s, target="hip:gfx90a").assembly
        assert "gfx90a" in asm and "sl_f_kernel0" in asm
    with pytest.raises(sl.CompileError, match="Metal assembly needs Apple's metal compiler"):
        sl.compile(f, s, target="metal").assembly
