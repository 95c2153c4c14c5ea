"""The code the project shows its users runs as written: the README's main example
(read from README.md, so the test follows the text) and the code blocks of the public
contract (SPEC sections 1-5, copied verbatim below; only the array sizes are small),
each checked against numpy / torch."""
import pathlib
import re

import numpy as np
import pytest

import schedlang as sl

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """A private cache dir: no tuning database of the machine picks these schedules."""
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.getbasetemp() / "sl_doc_cache"))
    monkeypatch.delenv("BEAM", raising=False)


def readme_python_block(after_heading):
    """The first ```python block after the line ``after_heading`` of README.md."""
    text = README.read_text()
    start = text.index("\n" + after_heading + "\n")
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert m is not None, f"README.md has no python block after {after_heading!r}"
    return m.group(1)


def test_readme_main_example_runs_as_written(capsys):
    code = readme_python_block("## Example")
    assert "sl.compile(C, s" in code and "assert np.allclose" in code
    ns = {}
    exec(compile(code, "README.md:Example", "exec"), ns)
    # its own assert checked the result; check it again, and what it printed
    a, b, out = ns["a"], ns["b"], ns["out"]
    assert out.shape == (256, 512) and out.dtype == np.float32
    np.testing.assert_allclose(out, 2.0 * (a.astype(np.float64) @ b), rtol=1e-4)
    assert "parallel for C.s0.i.o" in capsys.readouterr().out


def test_readme_tensorize_block_splits_then_reorders():
    """The README's tensorize block: ``split`` returns the new loops, so the reorder that
    follows it is a statement of its own (chaining ``.reorder`` onto ``split`` fails)."""
    code = readme_python_block("## Tensor instructions (`tensorize`)")
    assert ".split(j, 16, names=(\"jt\", \"jv\")).reorder" not in code
    M, N, K = 6, 32, 16
    A = sl.Input("A", sl.uint8, (M, K))
    B = sl.Input("B", sl.int8, (K, N))
    i, j, ko, ki = sl.vars("i j ko ki")
    Bp, C = sl.Func("Bp"), sl.Func("C", shape=(M, N))
    setup = 's = sl.Schedule(C)\n'
    lines = code.splitlines()
    ns = dict(sl=sl, A=A, B=B, i=i, j=j, ko=ko, ki=ki, Bp=Bp, C=C, K=K)
    exec("\n".join(lines[:3]), ns)                 # the algorithm
    exec(setup + lines[3], ns)                     # cache_write
    exec("jo, ji = s[C].split(j, 32)\ns[acc].compute_at(C, jo)", ns)
    exec("\n".join(lines[4:]), ns)                 # split, reorder, unroll, tensorize
    kern = sl.compile(C, ns["s"], target="llvm:icelake-server")
    assert "vpdpbusd" in kern.source


# --- SPEC section 1: the algorithm (verbatim)
def spec_matmul():
    A = sl.Input("A", sl.float32, ("M", "K"))   # dims: int, or a str naming a symbolic size
    B = sl.Input("B", sl.float32, ("K", "N"))
    alpha = sl.Param("alpha", sl.float32)       # scalar argument
    i, j = sl.Var("i"), sl.Var("j")              # or: i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")            # reduction domain [0, K); RDom((lo, extent), ...) for several dims
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))   # shape: required for outputs, optional for intermediates
    C[i, j] = alpha * sl.sum(A[i, k] * B[k, j])        # inline reduction over the RDoms in the expression
    return A, B, alpha, i, j, k, C


# --- SPEC section 2: the schedule (verbatim, print and to_json included)
def spec_schedule(C, i, j, k):
    s = sl.Schedule(C)                      # covers every Func the output C depends on
    io, ii = s[C].split(i, 32)              # returns the new loop variables
    jo, ji = s[C].split(j, 64)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ki, ji)    # OUTERMOST FIRST (reads like the printed loop nest)
    s[C].vectorize(ji, 16).unroll(ki).parallel(io)
    print(s)        # Python source that rebuilds this schedule (see below)
    s.to_json()     # and back: sl.Schedule.from_json(text, C), also onto a freshly built identical algorithm
    return s


def test_spec_sections_1_to_3():
    A, B, alpha, i, j, k, C = spec_matmul()
    s = spec_schedule(C, i, j, k)
    rng = np.random.default_rng(0)
    a = rng.random((40, 20), dtype=np.float32)
    b = rng.random((20, 70), dtype=np.float32)
    c = np.empty((40, 70), np.float32)
    ref = 2.0 * (a.astype(np.float64) @ b)

    # SPEC section 3 (verbatim)
    kern = sl.compile(C, s, target="llvm")     # targets: "llvm" (host CPU, default), "llvm:<cpu>",
    out = kern(A=a, B=b, alpha=2.0)           # numpy arrays in, numpy array out; sizes bound from shapes
    kern(A=a, B=b, alpha=2.0, out=c)          # write into a preallocated array
    kern.source        # the generated code (LLVM IR, CUDA C, HIP C, Metal Shading Language)
    kern.loop_ir       # the lowered loop nest, printed like pseudocode
    stats = kern.time(A=a, B=b, alpha=2.0, budget_s=0.01)   # -> timing statistics (median, min, runs)
    sl.lower(C, s)     # the loop IR without compiling

    np.testing.assert_allclose(out, ref, rtol=1e-5)
    np.testing.assert_allclose(c, ref, rtol=1e-5)
    assert stats.runs >= 3 and 0 < stats.min <= stats.median

    # str(s) replays in a namespace with sl, an unscheduled s and the algorithm's names
    ns = dict(sl=sl, A=A, B=B, alpha=alpha, i=i, j=j, k=k, C=C, s=sl.Schedule(C))
    exec(str(s), ns)
    assert str(ns["s"]) == str(s)
    # the JSON goes onto a freshly built identical algorithm
    A2, B2, alpha2, i2, j2, k2, C2 = spec_matmul()
    s2 = sl.Schedule.from_json(s.to_json(), C2)
    assert str(s2) == str(s) and s2.to_json() == s.to_json()


def test_spec_section_4_autotune():
    A = sl.Input("A", sl.float32, (32, 16))
    B = sl.Input("B", sl.float32, (16, 32))
    i, j = sl.vars("i j")
    k = sl.RDom(A.shape[1], name="k")
    C = sl.Func("C", shape=(A.shape[0], B.shape[1]))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    s = sl.autotune(C, target="llvm", beam=4, budget_s=1.0)   # returns the best Schedule found
    assert isinstance(s, sl.Schedule)
    rng = np.random.default_rng(1)
    a = rng.random((32, 16), dtype=np.float32)
    b = rng.random((16, 32), dtype=np.float32)
    np.testing.assert_allclose(sl.compile(C, s)(A=a, B=b), a @ b, rtol=1e-5)
    # later, without a schedule: the tuned one from the database
    assert sl.compile(C).loop_ir == sl.compile(C, s).loop_ir


def test_spec_section_5_frontend():
    rng = np.random.default_rng(2)
    np_a = rng.random((5, 6), dtype=np.float32)
    np_b = rng.random((6, 7), dtype=np.float32)
    # SPEC section 5 (verbatim but for the sizes: 4 channels of 6 x 6, not 64 of 56 x 56)
    from schedlang.frontend import Tensor
    import schedlang.frontend as F
    x = Tensor.input("x", (1, 4, 6, 6)); w = Tensor.input("w", (4, 4, 3, 3))
    y = F.conv2d(x, w, padding=1).relu()
    kern = sl.compile(y)                      # a Tensor lowers to its output Func and Schedule
    y2 = (Tensor(np_a) @ Tensor(np_b)).softmax(-1).numpy()   # eager use: builds, compiles, runs, caches

    xa = rng.standard_normal((1, 4, 6, 6), dtype=np.float32)
    wa = rng.standard_normal((4, 4, 3, 3), dtype=np.float32)
    xp = np.pad(xa.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = sum(np.einsum("nchw,kc->nkhw", xp[:, :, dy:dy + 6, dx:dx + 6], wa[:, :, dy, dx])
              for dy in range(3) for dx in range(3))
    np.testing.assert_allclose(kern(x=xa, w=wa), np.maximum(ref, 0), rtol=1e-4, atol=1e-4)
    e = np.exp(np_a.astype(np.float64) @ np_b)
    np.testing.assert_allclose(y2, e / e.sum(-1, keepdims=True), rtol=1e-5)
