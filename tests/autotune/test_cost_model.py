"""Loop-IR features and the cost model: Spearman, ridge ranking, held-out correlation."""
import math

import numpy as np
import pytest

import schedlang as sl
from schedlang.autotune import measure
from schedlang.autotune.cost_model import CostModel, prior_scores, rank_correlation, spearman
from schedlang.autotune.features import FEATURE_NAMES, FEATURE_VERSION, loop_features
from schedlang.autotune.database import TuningDatabase
from schedlang.autotune.keys import workload_key

from .conftest import matmul


def _feature(stmt, name):
    return loop_features(stmt)[FEATURE_NAMES.index(name)]


def test_features_see_vectorization_parallelism_and_flops():
    C = matmul(64)
    plain = sl.lower(C, sl.Schedule(C))
    s = sl.Schedule(C)
    s[C].vectorize("j", 16).parallel("i")
    fast = sl.lower(C, s)
    assert len(loop_features(plain)) == len(FEATURE_NAMES)
    assert _feature(plain, "vector_store_share") == 0
    assert _feature(fast, "vector_store_share") == 1
    assert _feature(fast, "log_max_lanes") == 4
    assert _feature(plain, "parallel_core_share") == 0 < _feature(fast, "parallel_core_share")
    # 64^3 multiply-adds
    assert abs(_feature(plain, "log_flops") - math.log2(1 + 2 * 64 ** 3)) < 0.1
    assert _feature(fast, "log_stores_executed") < _feature(plain, "log_stores_executed")


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 45]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert abs(spearman([1, 2, 2, 3], [1, 2, 3, 4]) - 0.9487) < 1e-3   # ties share ranks
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_ridge_ranks_candidates_within_each_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, len(FEATURE_NAMES)))
    groups = np.repeat(np.arange(4), 60)
    w = rng.normal(size=len(FEATURE_NAMES))
    log_t = X @ w * 0.2 + groups * 5.0 + rng.normal(scale=0.05, size=len(X))  # per-problem scale
    t = np.exp(log_t)
    model = CostModel().fit(X[:160], t[:160], groups[:160])
    pred = model.predict(X[160:])
    for g in (2, 3):
        m = groups[160:] == g
        assert spearman(pred[m], t[160:][m]) > 0.9
    rho, n = rank_correlation(X, t, groups)
    assert rho > 0.9 and n > 0


def test_untrained_model_uses_the_prior():
    X = np.zeros((2, len(FEATURE_NAMES)))
    X[0, FEATURE_NAMES.index("log_stores_executed")] = 20
    X[1, FEATURE_NAMES.index("log_stores_executed")] = 10
    assert not CostModel().trained
    assert list(np.argsort(CostModel().predict(X))) == [1, 0]
    assert list(np.argsort(prior_scores(X))) == [1, 0]


def test_measurements_are_stored_with_features_and_rank_on_held_out_data():
    from schedlang.autotune import tune
    C = matmul(64)
    tune(C, beam=2, budget_s=4, progress=False)
    key = workload_key(C)
    rows = TuningDatabase().measurements(key.machine, FEATURE_VERSION, key)
    assert len(rows) >= 3
    assert all(len(r.features) == len(FEATURE_NAMES) and r.time_s > 0 for r in rows)
    X = [r.features for r in rows]
    t = [r.time_s for r in rows]
    rho, n = rank_correlation(X * 3, t * 3, held_out=0.3)   # enough rows for a held-out split
    assert n >= 3 and -1.0 <= rho <= 1.0
    assert measure.outputs_match(np.ones(3, np.float32), np.ones(3, np.float32) + 1e-6)
    assert not measure.outputs_match(np.ones(3, np.float32), np.ones(3, np.float32) + 1)
