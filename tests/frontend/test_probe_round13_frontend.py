"""Round 13 probes of the tensor frontend (SPEC section 5): dtype corners and the Winograd
conv2d reached every way a user can."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_integers_does_not_wrap_in_the_integer_type(op):
    torch = pytest.importorskip("torch")
    # x - max(x) in uint8 wrapped (0 - 3 = 253) and gave nan; int8 and int32 extremes too
    for a, axis in ((np.array([[3, 0, 1], [0, 255, 7]], np.uint8), -1),
                    (np.array([[-100, 100, 0, 5]], np.int8), -1),
                    (np.array([[-2**31, 2**31 - 1], [5, -7]], np.int32), 0)):
        got = getattr(Tensor(a), op)(axis).numpy()
        ref = getattr(torch, op)(torch.from_numpy(a.astype(np.float64)), axis).numpy()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-3, atol=1e-3)
