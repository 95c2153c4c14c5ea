"""Eager frontend use (``Tensor(array)....numpy()``) follows SPEC §3's ``schedule=None`` rule
as ``sl.compile(tensor)`` does: a tuned schedule from the tuning database, else with
``BEAM=N`` one tuned now, else the frontend's default schedule; and the eager kernel cache
never hides a schedule tuned after its kernel was cached."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.autotune import search
from schedlang.autotune.database import TuningDatabase
from schedlang.autotune.integration import DEFAULT_ORIGIN
from schedlang.autotune.keys import workload_key
from schedlang.frontend import Tensor
from schedlang.frontend import tensor as tensor_module
from schedlang.targets.kernel import default_threads

from .conftest import matmul

rng = np.random.default_rng(0)
A = rng.random((32, 32), dtype=np.float32)
B = rng.random((32, 32), dtype=np.float32)


def graph(a=A, b=B):
    """A fresh eager graph (new Func and Input names each time) of one structure."""
    return (Tensor(a) + Tensor(b)).relu()


def the_cached_entry():
    (entry,) = tensor_module.KERNEL_CACHE.values()
    return entry


def ops(schedule):
    return [d.op for d in schedule.trace]


@pytest.fixture(autouse=True)
def _empty_kernel_cache():
    F.clear_cache()
    yield
    F.clear_cache()


def store_for_graph(edit):
    """Store, as a tuning run would, a schedule of ``graph()``'s workload made by ``edit``."""
    out, _ = graph().__schedlang_pipeline__()
    s = sl.Schedule(out)
    edit(s, out)
    assert TuningDatabase().store_best(workload_key([out]), s, 1e-6, beam=1)
    return s


def test_numpy_picks_up_a_schedule_tuned_after_its_kernel_was_cached():
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))
    assert F.cache_info()["compiles"] == 1
    assert ops(the_cached_entry().kernel.schedule) != ["split"]     # the frontend default
    store_for_graph(lambda s, out: s[out].split(out.args[1], 4))
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))
    assert F.cache_info()["compiles"] == 2
    assert ops(the_cached_entry().kernel.schedule) == ["split"]
    # the database did not change: the cached kernel is reused
    graph(B, A).numpy()
    assert F.cache_info() == {"compiles": 2, "hits": 1, "size": 1}
    # it changed for another workload only: asked again, the same kernel is kept
    assert TuningDatabase().store_best(workload_key(matmul(16)), sl.Schedule(matmul(16)), 1e-6,
                                       beam=1)
    np.testing.assert_allclose(graph(B, A).numpy(), np.maximum(A + B, 0))
    assert F.cache_info() == {"compiles": 2, "hits": 2, "size": 1}


def test_numpy_after_sl_autotune_of_the_same_graph_uses_the_tuned_schedule():
    graph().numpy()
    s = sl.autotune(graph(), beam=1, budget_s=1.5)
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))
    entry = the_cached_entry()
    assert entry.origin != DEFAULT_ORIGIN
    assert ops(entry.kernel.schedule) == ops(s)


def test_numpy_with_beam_tunes_once_then_reuses(monkeypatch):
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.setenv("SCHEDLANG_BEAM_BUDGET_S", "1.5")
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))     # tunes now
    out, _ = graph().__schedlang_pipeline__()
    assert TuningDatabase().best_row(workload_key([out]))["beam"] == 1
    monkeypatch.setattr(search, "tune", lambda *a, **k: pytest.fail("searched again"))
    np.testing.assert_allclose(graph(B, A).numpy(), np.maximum(A + B, 0))
    assert F.cache_info()["compiles"] == 1            # its own tuning run left it valid
    F.clear_cache()
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))     # loads, no search
    assert the_cached_entry().origin != DEFAULT_ORIGIN


def test_numpy_without_database_or_beam_uses_the_frontend_default(tmp_path):
    out, default = graph().__schedlang_pipeline__()
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))
    entry = the_cached_entry()
    assert entry.origin == DEFAULT_ORIGIN and ops(entry.kernel.schedule) == ops(default)
    assert not (tmp_path / "cache" / "tuning.sqlite3").exists()


def test_numpy_compiles_one_kernel_per_thread_count(monkeypatch):
    store_for_graph(lambda s, out: s[out].parallel(out.args[0]))      # tuned for every core
    monkeypatch.setenv("SCHEDLANG_NUM_THREADS", "1")
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))
    one = [e for e in tensor_module.KERNEL_CACHE.values()]
    assert len(one) == 1 and one[0].kernel.num_threads == 1
    monkeypatch.delenv("SCHEDLANG_NUM_THREADS")
    np.testing.assert_allclose(graph().numpy(), np.maximum(A + B, 0))
    assert F.cache_info()["size"] == 2
    by_threads = {e.kernel.num_threads: e for e in tensor_module.KERNEL_CACHE.values()}
    threads = default_threads()
    if threads != 1:
        # the stored schedule was tuned for every core, not for one thread
        assert ops(by_threads[threads].kernel.schedule) == ["parallel"]
        assert by_threads[1].origin == DEFAULT_ORIGIN
