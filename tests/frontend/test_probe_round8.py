"""Conformance probes of the tensor frontend (SPEC section 5) found by an independent
round of testing: torch tensors that numpy's own conversion refuses, item assignment,
and numpy's ``x ** 0.5``."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor

try:
    import torch
except ImportError:      # the tests that need it skip; the rest run without it
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


@needs_torch
def test_a_torch_tensor_that_requires_grad_is_data_as_in_torch_tensor():
    # np.asarray refuses it with a RuntimeError; torch.tensor(t) and the kernels take
    # its values
    g = torch.arange(3.0, requires_grad=True)
    np.testing.assert_array_equal((Tensor(g) * 2).numpy(), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal((Tensor(np.ones(3, np.float32)) + g).numpy(), [1.0, 2.0, 3.0])
    b = torch.ones(2, dtype=torch.bfloat16, requires_grad=True)
    np.testing.assert_array_equal(Tensor(b).numpy(), [1.0, 1.0])


@needs_torch
def test_a_torch_tensor_with_a_pending_negation_gives_its_values():
    x = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64).conj().imag
    assert x.is_neg()
    np.testing.assert_array_equal(Tensor(x).numpy(), [-2.0, 1.0])


def test_data_that_fails_to_convert_is_an_algorithm_error_naming_tensor():
    class Broken:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("device is gone")
    with pytest.raises(sl.AlgorithmError, match=r"Tensor: cannot make an array of Broken.*"
                                                r"device is gone"):
        Tensor(Broken())


def test_item_assignment_is_refused_with_what_to_do_instead():
    t = Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(sl.AlgorithmError, match=r"item assignment.*F\.where"):
        t[0] = 1.0
    with pytest.raises(sl.AlgorithmError, match="item assignment"):
        t[:, 1:] = Tensor(np.ones((2, 2), np.float32))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_power_one_half_is_numpys_square_root(dtype):
    # numpy (and torch for float32 / float64) compute x ** 0.5 as sqrt(x): -0.0 stays
    # -0.0 and -inf gives nan, where C's pow gives +0.0 and +inf
    v = np.array([0.0, -0.0, np.inf, -np.inf, 4.0, -4.0, 2.0, np.nan], dtype)
    with np.errstate(invalid="ignore"):
        ref = v ** 0.5
    for got in ((Tensor(v) ** 0.5).numpy(), F.pow(Tensor(v), 0.5).numpy(),
                Tensor(v).pow(0.5).numpy()):
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
    # an integer base keeps the weak literal rule: float32
    np.testing.assert_array_equal((Tensor(np.array([4, 9], np.int32)) ** 0.5).numpy(),
                                  np.array([2.0, 3.0], np.float32))


def test_pad_takes_the_mode_in_numpys_positional_place():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor(a)
    np.testing.assert_array_equal(F.pad(t, 1, "edge").numpy(), np.pad(a, 1, "edge"))
    np.testing.assert_array_equal(t.pad(((0, 0), (2, 1)), "reflect").numpy(),
                                  np.pad(a, ((0, 0), (2, 1)), "reflect"))
    np.testing.assert_array_equal(t.pad(1, "constant", constant_values=5).numpy(),
                                  np.pad(a, 1, "constant", constant_values=5))
    with pytest.raises(sl.AlgorithmError, match="pad: mode given twice"):
        t.pad(1, "wrap", mode="edge")
    with pytest.raises(sl.AlgorithmError, match="pad: mode 'foo' is not one of"):
        t.pad(1, "foo")


@needs_torch
def test_torch_dtypes_are_accepted_where_a_dtype_is_taken():
    # torch's own spelling of softmax(x, dim, dtype=torch.float64), cast and input types
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    got = Tensor(a).softmax(-1, dtype=torch.float64).numpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, torch.softmax(torch.tensor(a, dtype=torch.float64), -1))
    assert Tensor(a).cast(torch.int8).dtype == sl.int8
    assert Tensor(a).cast(torch.half).dtype == sl.float16
    assert Tensor(a).cast(torch.bfloat16).dtype == sl.bfloat16
    x = Tensor.input("x", (3,), torch.bool)
    assert x.dtype == sl.bool
    np.testing.assert_array_equal(sl.compile(~x)(x=np.array([True, False, True])),
                                  [False, True, False])
    with pytest.raises(sl.AlgorithmError, match="torch.complex64 is not a schedlang type"):
        Tensor(a).cast(torch.complex64)


def test_a_dtype_in_numpys_positional_place_of_a_reduction_is_not_taken_as_keepdims():
    # np.sum(a, 0, np.float64) passes a dtype third; it used to keep the dims silently
    t = Tensor(np.ones((2, 3), np.float32))
    for op in ("sum", "mean", "max", "min"):
        with pytest.raises(sl.AlgorithmError, match=f"{op}: keepdims must be True or False"):
            getattr(t, op)(0, np.float64)
    with pytest.raises(sl.AlgorithmError, match="keepdims must be True or False, got 'yes'"):
        F.sum(t, 1, "yes")
    assert t.sum(0, 1).shape == (1, 3) and t.max(0, np.True_).shape == (1, 3)
    assert t.mean(1, keepdim=False).shape == (2,)
