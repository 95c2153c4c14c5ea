"""Conformance probes of the tensor frontend (SPEC section 5) found by an eleventh
independent round of testing: ``s[tensor]`` of a Schedule built from a Tensor finds the
Input of a ``Tensor.input`` and the Func of a stored op inside the pipeline, and says in
the user's terms why an inline Tensor has no schedule; ``unsqueeze`` out of range states
the tensor's own shape."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor


def test_a_tensor_input_indexes_its_input_in_a_schedule_of_the_graph():
    x = Tensor.input("x", (16, 8))
    y = x.exp().sum(1)
    s = sl.Schedule(y)
    assert s[x] is s["x"]            # the Input's schedule, not a new output Func
    kern = sl.compile(y, s)
    a = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_allclose(kern(x=a), np.exp(a).sum(1), rtol=1e-5)


def test_a_stored_intermediate_tensor_is_scheduled_inside_the_graph():
    x, w = Tensor.input("x", (32, 24)), Tensor.input("w", (24, 16))
    m = x @ w
    y = m.relu() + 1
    s = sl.Schedule(y)
    s[m].compute_at(y, s[y].loop_names()[0])
    kern = sl.compile(y, s)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 24)).astype(np.float32)
    b = rng.standard_normal((24, 16)).astype(np.float32)
    np.testing.assert_allclose(kern(x=a, w=b), np.maximum(a @ b, 0) + 1, rtol=1e-4, atol=1e-5)


def test_an_inline_tensor_has_no_schedule_and_the_message_says_why():
    x = Tensor.input("x", (16, 8))
    e = x.exp()
    s = sl.Schedule(e.sum(1))
    with pytest.raises(sl.ScheduleError) as info:
        s[e]
    msg = str(info.value)
    assert "op=exp" in msg and "inline" in msg and "schedule the Func that reads it" in msg


def test_unsqueeze_out_of_range_names_the_tensors_own_shape():
    x = Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(sl.AlgorithmError) as info:
        F.unsqueeze(x, 3)
    msg = str(info.value)
    assert "unsqueeze" in msg and "(2, 3)" in msg and "[-3, 2]" in msg
    with pytest.raises(sl.AlgorithmError, match=r"\[-3, 2\]"):
        x.unsqueeze(-4)
    assert x.unsqueeze(2).shape == (2, 3, 1) and x.unsqueeze(-3).shape == (1, 2, 3)
