"""Messages of the access-bounds check print the extent as the user would write it."""
import numpy as np
import pytest

import schedlang as sl


def test_an_unbounded_scatter_index_names_the_extent_simplified():
    A = sl.Input("A", sl.float32, ("N",))
    x = sl.Var("x")
    h = sl.Func("h", shape=(4,))
    h[x] = 0
    r = sl.RDom(A.shape[0], name="r")
    h[sl.cast(sl.int32, A[r])] += 1
    with pytest.raises(sl.AlgorithmError, match=r"may fall outside 0\.\.3; clamp the index"):
        sl.compile(h, sl.Schedule(h))(A=np.zeros(3, np.float32))
