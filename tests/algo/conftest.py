"""Shared setup for the algorithm-language conformance tests."""
import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """No tuning database or BEAM search leaks into these tests: a private cache dir."""
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path_factory.getbasetemp() / "sl_cache"))
    monkeypatch.delenv("BEAM", raising=False)
