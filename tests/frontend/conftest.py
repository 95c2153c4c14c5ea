"""Shared setup for the tensor frontend tests: a private cache, and a numpy checker."""
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """No tuning database or BEAM search leaks into these tests: a private cache dir."""
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.getbasetemp() / "sl_cache"))
    monkeypatch.delenv("BEAM", raising=False)


def check(t, ref, rtol=1e-5, atol=1e-5):
    """Compute Tensor ``t`` and compare it with the numpy reference ``ref`` (shape, dtype,
    values)."""
    out = t.numpy()
    ref = np.asarray(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    if ref.dtype.kind in "fc":
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(out, ref)
    return out
