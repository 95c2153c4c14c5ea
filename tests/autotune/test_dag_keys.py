"""A pipeline whose expressions share sub-expressions (a DAG) is keyed for the tuning
database in time linear in the DAG: with a database on disk, every sl.compile without a
schedule computes that key."""
import os
import time

import numpy as np

import schedlang as sl
from schedlang.autotune.database import TuningDatabase
from schedlang.autotune.keys import algorithm_hash


def _chain(depth, name="f"):
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    x = A[i]
    for _ in range(depth):
        x = sl.select(x > 0, x * 0.5, x + 1)     # three uses of x per level
    f = sl.Func(name, shape=(A.shape[0],))
    f[i] = x
    return f


def test_a_deep_dag_is_hashed_in_linear_time_and_by_structure():
    t0 = time.perf_counter()
    digest, _ = algorithm_hash(_chain(40))        # 3**40 nodes as a tree
    assert time.perf_counter() - t0 < 5
    assert digest == algorithm_hash(_chain(40, name="g"))[0]    # names do not enter it
    assert digest != algorithm_hash(_chain(39))[0]


def test_compiling_a_deep_dag_with_a_tuning_database_on_disk():
    db = TuningDatabase()         # in the private cache of conftest
    db._connect(create=True)      # an empty database on disk, as after any tuning
    db.close()
    assert os.path.exists(db.path)
    f = _chain(40)
    t0 = time.perf_counter()
    kern = sl.compile(f)          # looks the workload up in the database
    assert time.perf_counter() - t0 < 60
    a = np.linspace(-5, 5, 11).astype(np.float32)
    ref = a.copy()
    for _ in range(40):
        ref = np.where(ref > 0, ref * np.float32(0.5), ref + 1)
    np.testing.assert_allclose(kern(A=a), ref)
