"""Shared setup for the autotuner tests: a private cache directory (so no test touches the
real tuning database), no BEAM from the environment, and small algorithms."""
import numpy as np
import pytest

import schedlang as sl


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BEAM", raising=False)
    monkeypatch.delenv("SCHEDLANG_BEAM_BUDGET_S", raising=False)


def matmul(n=64, name="C"):
    """``C = A @ B`` for n x n float32 matrices."""
    A = sl.Input("A", sl.float32, (n, n))
    B = sl.Input("B", sl.float32, (n, n))
    i, j = sl.vars("i j")
    k = sl.RDom(n, name="k")
    C = sl.Func(name, shape=(n, n))
    C[i, j] = sl.sum(A[i, k] * B[k, j])
    return C


def blur(h=34, w=66):
    """A separable 3x3 box blur with a 'valid' output of (h - 2) x (w - 2)."""
    img = sl.Input("img", sl.float32, (h, w))
    y, x = sl.vars("y x")
    bx = sl.Func("blur_x")
    bx[y, x] = (img[y, x] + img[y, x + 1] + img[y, x + 2]) * (1.0 / 3)
    by = sl.Func("blur_y", shape=(h - 2, w - 2))
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) * (1.0 / 3)
    return by


def check_matmul(kern, n=64):
    rng = np.random.default_rng(1)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    np.testing.assert_allclose(kern(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


class FakeTerminal:
    """A stderr stand-in that says it is a terminal and keeps what is written."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, s):
        self.text += s
        return len(s)

    def flush(self):
        pass
