"""A declared Func (``Func.declare``): read before it is defined, as the frontend's deferred
ops are; a pipeline that reaches it undefined, or a definition of another type, is refused."""
import numpy as np
import pytest

import schedlang as sl


def test_a_declared_func_is_read_before_its_definition():
    i = sl.Var("i")
    f = sl.Func("f", shape=(4,)).declare(sl.float32)
    g = sl.Func("g", shape=(4,))
    g[i] = f[i] + 1
    with pytest.raises(sl.ScheduleError, match=r"Func f is read but has no definition; define it"):
        sl.Schedule(g)
    f[i] = sl.cast(sl.float32, i) * 2
    np.testing.assert_array_equal(sl.compile(g)(), [1, 3, 5, 7])


def test_declare_mistakes_are_algorithm_errors():
    i = sl.Var("i")
    with pytest.raises(sl.AlgorithmError, match="only a Func with a shape="):
        sl.Func("h").declare(sl.float32)
    f = sl.Func("f", shape=(4,)).declare(sl.float32)
    with pytest.raises(sl.AlgorithmError, match="f has 1 dimensions but is indexed with 2"):
        f[i, i]
    with pytest.raises(sl.AlgorithmError, match="f was declared float32 but is defined with a "
                                                 "int32 value; cast the value"):
        f[i] = i
    f[i] = sl.cast(sl.float32, i)
    with pytest.raises(sl.AlgorithmError, match="only a Func with a shape= and no definition"):
        f.declare(sl.float32)
