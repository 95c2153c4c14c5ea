"""Conformance probes of the tensor frontend (SPEC section 5) found by a tenth independent
round of testing: a comparison with a Python int that the tensor's integer type cannot hold
compares by value, as numpy 2 does (``uint8_tensor > -1`` is all True), instead of being
refused; and conv2d's shape mismatch names the user's inputs."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

_COMPARISONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}


@pytest.mark.parametrize("dtype, literal", [
    (np.uint8, -1), (np.int8, 1000), (np.int8, -129), (np.uint16, 70000),
    (np.int32, 2**31), (np.uint32, -2**40), (np.int64, 2**63), (np.uint64, -1),
    (np.bool_, 2**40),
])
@pytest.mark.parametrize("op", sorted(_COMPARISONS))
def test_a_comparison_with_an_out_of_range_int_literal_compares_by_value(dtype, literal, op):
    if dtype is np.bool_:
        a = np.array([True, False])
    else:
        info = np.iinfo(dtype)
        a = np.array([0, 1, info.min, info.max], dtype)
    fn = getattr(F, op)
    np.testing.assert_array_equal(fn(Tensor(a), literal).numpy(), _COMPARISONS[op](a, literal))
    np.testing.assert_array_equal(fn(literal, Tensor(a)).numpy(), _COMPARISONS[op](literal, a))


def test_operators_compare_out_of_range_literals_in_a_compiled_kernel():
    x = Tensor.input("x", (3,), sl.uint8)
    kern = sl.compile([x > -1, x == 300, x != 300])
    a = np.array([0, 7, 255], np.uint8)
    always, never, differs = kern(x=a)
    assert always.dtype == np.bool_ and always.all()
    assert not never.any() and differs.all()


def test_arithmetic_with_an_out_of_range_literal_is_still_refused_as_numpy_does():
    with pytest.raises(sl.AlgorithmError, match="does not fit"):
        Tensor(np.array([1], np.int8)) + 1000


def test_a_conv2d_shape_mismatch_names_the_inputs():
    x = Tensor.input("X", (1, 4, 8, 8))
    w = Tensor.input("W", (8, 3, 3, 3))
    with pytest.raises(sl.AlgorithmError, match=r"\(1, 4, 8, 8\) of X and weight "
                                                r"\(8, 3, 3, 3\) of W"):
        F.conv2d(x, w)
