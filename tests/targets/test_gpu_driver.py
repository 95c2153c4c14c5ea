"""The GPU driver runtime (schedlang.targets.gpu_driver): the offline compile check (nvcc +
ptxas, clang -x hip), the errors when no driver is installed, the kernelParams packing, and,
where a GPU is present, a kernel compiled, loaded and run end to end.

Run as a script (``python tests/targets/test_gpu_driver.py``) on a machine with a GPU, it
runs the end-to-end checks and prints what it compiled with and the timings."""
import ctypes
import math

import numpy as np
import pytest

from schedlang.errors import ArgumentError, CompileError
from schedlang.targets.gpu_driver import (SCALAR_KINDS, DriverError, GpuDriver,
                                          check_compiles, compile_source, find_compiler,
                                          find_hiprtc, find_nvrtc, pack_kernel_params)

ADD_SRC = r'''
extern "C" __global__ void add(float* __restrict__ a, const float* __restrict__ b,
                               long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
'''

# Writes each scalar argument, widened to double, so the packing of every kind (sizes and
# alignments mixed) can be checked on the device.
SCALARS_SRC = r'''
extern "C" __global__ void scalars(double* out, signed char a, short b, int c, long long d,
                                   unsigned char e, unsigned short f, unsigned int g,
                                   unsigned long long h, float x, double y, bool k) {
  out[0] = a; out[1] = b; out[2] = c; out[3] = (double)d; out[4] = e; out[5] = f;
  out[6] = g; out[7] = (double)h; out[8] = x; out[9] = y; out[10] = k ? 1.0 : 0.0;
}
'''
SCALAR_ARGS = [("i8", -5), ("i16", -300), ("i32", -70000), ("i64", -(1 << 40)), ("u8", 250),
               ("u16", 65000), ("u32", 4000000000), ("u64", 1 << 50), ("f32", 0.25),
               ("f64", -1.5e300), ("bool", True)]

# Shared memory, a barrier and math functions, as generated kernels use them.
REDUCE_SRC = r'''
extern "C" __global__ void __launch_bounds__(256) row_norm(float* out, const float* in,
                                                           int cols) {
  __shared__ float acc[256];
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = in[(long long)blockIdx.x * cols + c];
    s = fmaf(v, v, s);
  }
  acc[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) acc[threadIdx.x] += acc[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sqrtf(acc[0]) + expf(0.0f) - 1.0f + tanhf(0.0f);
}
'''


def _needs(vendor):
    if find_compiler(vendor) is None:
        pytest.skip(f"no offline {vendor} compiler installed")


# --- offline compile check ----------------------------------------------------------------

def test_check_compiles_cuda_gives_ptx():
    _needs("cuda")
    ptx = check_compiles(ADD_SRC, "cuda")
    assert ".entry add(" in ptx and ".target sm_80" in ptx
    assert ".target sm_90" in check_compiles(REDUCE_SRC, "cuda", "sm_90")


def test_check_compiles_cuda_syntax_error_quotes_compiler_and_line():
    _needs("cuda")
    bad = ADD_SRC.replace("a[i] += b[i];", "a[i] += b[i] + undefined_q;")
    with pytest.raises(DriverError) as info:
        check_compiles(bad, "cuda")
    msg = str(info.value)
    assert isinstance(info.value, CompileError)
    assert 'identifier "undefined_q" is undefined' in msg
    assert "5 |   if (i < n) a[i] += b[i] + undefined_q;" in msg


def test_check_compiles_cuda_runs_ptxas():
    # nvcc -ptx accepts this; only ptxas sees that the shared array cannot fit.
    _needs("cuda")
    src = ('extern "C" __global__ void big(float* a) { __shared__ float t[100000]; '
           't[threadIdx.x] = a[threadIdx.x]; __syncthreads(); '
           'a[threadIdx.x] = t[threadIdx.x ^ 1]; }')
    with pytest.raises(DriverError, match="ptxas.*too much shared data"):
        check_compiles(src, "cuda")


def test_check_compiles_hip():
    _needs("hip")
    asm = check_compiles(ADD_SRC, "hip")
    assert "gfx942" in asm and ".amdhsa_kernel add" in asm
    asm = check_compiles("#include <hip/hip_runtime.h>\n" + REDUCE_SRC, "hip", "gfx90a")
    assert ".amdhsa_kernel row_norm" in asm and "s_barrier" in asm


def test_check_compiles_hip_syntax_error():
    _needs("hip")
    bad = ADD_SRC.replace("a[i] += b[i];", "a[i] += b[i] + undefined_q;")
    with pytest.raises(DriverError) as info:
        check_compiles(bad, "hip")
    msg = str(info.value)
    assert "use of undeclared identifier 'undefined_q'" in msg
    assert "5 |   if (i < n) a[i] += b[i] + undefined_q;" in msg


def test_check_compiles_without_compiler_returns_none(monkeypatch):
    import schedlang.targets.gpu_driver as gd
    import schedlang.targets.gpu_compilers as gc
    monkeypatch.setattr(gc, "find_compiler", lambda vendor: None)
    assert gd.check_compiles(ADD_SRC, "cuda") is None
    assert gd.check_compiles(ADD_SRC, "hip") is None


def test_compile_source_cuda_without_gpu():
    if find_nvrtc() is None and find_compiler("cuda") is None:
        pytest.skip("neither NVRTC nor nvcc is installed")
    image = compile_source(ADD_SRC, "cuda", "sm_90")
    assert image.startswith(b"\x7fELF")
    with pytest.raises(DriverError, match="undefined_q"):
        compile_source(ADD_SRC.replace("b[i];", "undefined_q;"), "cuda", "sm_90")


def test_compile_source_says_what_to_install(monkeypatch):
    import schedlang.targets.gpu_driver as gd
    import schedlang.targets.gpu_compilers as gc
    monkeypatch.setattr(gc, "find_nvrtc", lambda: None)
    monkeypatch.setattr(gc, "find_hiprtc", lambda: None)
    monkeypatch.setattr(gc, "find_compiler", lambda vendor: None)
    with pytest.raises(DriverError, match=r"libnvrtc\.so.*pip install nvidia-cuda-nvrtc"):
        gd.compile_source(ADD_SRC, "cuda", "sm_90")
    with pytest.raises(DriverError, match=r"libhiprtc\.so"):
        gd.compile_source(ADD_SRC, "hip", "gfx942")
    with pytest.raises(DriverError, match="bad CUDA architecture 'gfx942'"):
        gd.compile_source(ADD_SRC, "cuda", "gfx942")


# --- driver absent ------------------------------------------------------------------------

def test_missing_cuda_driver_is_a_clear_error():
    if GpuDriver.available("cuda"):
        pytest.skip("a CUDA GPU is present")
    assert GpuDriver.available("cuda") is False
    for _ in range(2):   # the remembered failure is raised again, as clearly
        with pytest.raises(DriverError) as info:
            GpuDriver.get("cuda")
        msg = str(info.value)
        assert "CUDA" in msg and ("libcuda.so.1" in msg or "device" in msg)
        assert "NVIDIA driver" in msg or "nvidia-smi" in msg


def test_available_never_raises():
    assert GpuDriver.available("no-such-vendor") is False
    assert isinstance(GpuDriver.available("hip"), bool)
    with pytest.raises(DriverError, match="unknown GPU vendor 'no-such-vendor'"):
        GpuDriver.get("no-such-vendor")


# --- kernel argument packing --------------------------------------------------------------

def _read(params, i, ctype):
    return ctypes.cast(params.array[i], ctypes.POINTER(ctype))[0]


def test_pack_kernel_params_mixed_kinds():
    class Buf:
        ptr = 0x7F00_1234_5678

    args = [("ptr", 0xDEAD_BEEF_0000), ("ptr", Buf())] + SCALAR_ARGS + [
        ("f16", 1.5), ("bf16", -2.0), ("i64", np.int64(-3)), ("bool", 0)]
    p = pack_kernel_params(args)
    assert len(p) == len(args) and p.pointer is p.array
    got = [_read(p, i, SCALAR_KINDS[k][0]) for i, (k, _) in enumerate(args)]
    assert got[:2] == [0xDEAD_BEEF_0000, 0x7F00_1234_5678]
    assert got[2:13] == [v for _, v in SCALAR_ARGS]
    assert got[13:] == [0x3E00, 0xC000, -3, 0]
    # Each entry points at a value of its kind's own size.
    assert [ctypes.sizeof(v) for v in p.values][2:13] == [1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 1]
    assert _read(p, 10, ctypes.c_float) == 0.25 and _read(p, 11, ctypes.c_double) == -1.5e300
    assert math.isnan(_read(pack_kernel_params([("f32", float("nan"))]), 0, ctypes.c_float))
    assert pack_kernel_params([]).pointer is None


@pytest.mark.parametrize("arg, match", [
    (("i8", 128), r"argument 0 \(i8\): 128 is outside \[-128, 127\]"),
    (("u32", -1), r"outside \[0, 4294967295\]"),
    (("bool", 2), r"outside \[0, 1\]"),
    (("i32", 1.5), "expected an integer"),
    (("q7", 1), "unknown kind 'q7'"),
    ("i32", r"expected a \(kind, value\) pair"),
])
def test_pack_kernel_params_rejects(arg, match):
    with pytest.raises(ArgumentError, match=match):
        pack_kernel_params([arg])


# --- end to end on a GPU ------------------------------------------------------------------

def run_end_to_end(vendor="cuda", n=1 << 20):
    """Compile, load, allocate, copy, launch, synchronize and time the ``add`` kernel (and
    check every scalar kind's packing on the device); returns a summary dict."""
    drv = GpuDriver.get(vendor)
    rtc = (find_nvrtc() if vendor == "cuda" else find_hiprtc()) is not None
    add = drv.load(drv.compile(ADD_SRC)).function("add")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    da, db = drv.alloc(a.nbytes), drv.alloc(b.nbytes)
    drv.to_device(da, a.ctypes.data, a.nbytes)
    drv.to_device(db, b.ctypes.data, b.nbytes)
    grid, block = ((n + 255) // 256, 1, 1), (256, 1, 1)
    args = [("ptr", da), ("ptr", db.ptr), ("i64", n)]
    drv.launch(add, grid, block, args)
    drv.synchronize()
    out = np.empty_like(a)
    drv.to_host(out.ctypes.data, da, out.nbytes)
    np.testing.assert_array_equal(out, a + b)
    ms = drv.time_ms(lambda: drv.launch(add, grid, block, args))
    assert 0 < ms < 1000

    scalars = drv.load(drv.compile(SCALARS_SRC, name="scalars.cu")).function("scalars")
    dout = drv.alloc(11 * 8)
    drv.memset(dout, 0xFF)
    drv.launch(scalars, (1,), (1,), [("ptr", dout)] + SCALAR_ARGS)
    got = np.empty(11, np.float64)
    drv.to_host(got.ctypes.data, dout, got.nbytes)
    np.testing.assert_array_equal(got, [float(v) for _, v in SCALAR_ARGS])

    norm = drv.load(drv.compile(REDUCE_SRC)).function("row_norm")
    m = rng.standard_normal((8, 1000), dtype=np.float32)
    dm, dn = drv.alloc(m.nbytes), drv.alloc(8 * 4)
    drv.to_device(dm, m.ctypes.data, m.nbytes)
    drv.launch(norm, (8, 1, 1), (256, 1, 1), [("ptr", dn), ("ptr", dm), ("i32", 1000)])
    norms = np.empty(8, np.float32)
    drv.to_host(norms.ctypes.data, dn, norms.nbytes)
    np.testing.assert_allclose(norms, np.linalg.norm(m, axis=1), rtol=1e-5)

    empty = drv.alloc(0)
    assert empty.nbytes == 0 and empty.ptr
    for buf in (da, db, dout, dm, dn, empty):
        buf.release()
    buf.release()          # a second release is a no-op
    with pytest.raises(DriverError, match="kernel 'nope'"):
        drv.load(drv.compile(ADD_SRC)).function("nope")
    return {"device": drv.name, "arch": drv.arch, "runtime compiler": rtc,
            "add ms": ms, "GB/s": 3 * a.nbytes / ms / 1e6}


@pytest.mark.skipif(not GpuDriver.available("cuda"), reason="no CUDA GPU")
def test_cuda_end_to_end():
    info = run_end_to_end("cuda")
    assert info["arch"].startswith("sm_")


@pytest.mark.skipif(not GpuDriver.available("hip"), reason="no HIP GPU")
def test_hip_end_to_end():
    info = run_end_to_end("hip")
    assert info["arch"].startswith("gfx")


if __name__ == "__main__":
    for v in ("cuda", "hip"):
        if GpuDriver.available(v):
            print(v, run_end_to_end(v))
        else:
            print(v, "not available:", end=" ")
            try:
                GpuDriver.get(v)
            except DriverError as e:
                print(e)
