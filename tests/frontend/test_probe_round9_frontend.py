"""Conformance probes of the tensor frontend (SPEC section 5) found by a ninth independent
round of testing: kernels whose optimized code LLVM's SLP vectorizer breaks are compiled
without that pass instead of aborting the process, and the argument errors of a compiled
Tensor name only the arguments the caller gives (not the bound data of ``Tensor(array)``)."""
import numpy as np
import pytest

import schedlang as sl
import schedlang.frontend as F
from schedlang.frontend import Tensor


def _max_pool_reference(x, kernel, stride):
    """max_pool2d with ceil_mode: windows that start inside the image, cut at its edge."""
    (kh, kw), (sh, sw) = kernel, stride
    H, W = x.shape[-2:]
    oh, ow = -(-(H - kh) // sh) + 1, -(-(W - kw) // sw) + 1
    out = np.empty(x.shape[:-2] + (oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[..., i, j] = x[..., i * sh:i * sh + kh, j * sw:j * sw + kw].max(axis=(-2, -1))
    return out


def test_a_kernel_the_slp_vectorizer_breaks_still_compiles_and_is_right():
    # LLVM's SLP vectorizer turned this small unrolled max-reduction into a function that
    # fails verification, and machine code generation aborted the whole process
    x = np.random.default_rng(0).standard_normal((2, 1, 5, 5)).astype(np.float32)
    y = F.max_pool2d(Tensor(x), (2, 3), (1, 3), 0, ceil_mode=True).numpy()
    np.testing.assert_array_equal(y, _max_pool_reference(x, (2, 3), (1, 3)))


def test_an_optimizer_that_keeps_breaking_the_code_is_a_compile_error(monkeypatch):
    from schedlang.targets import llvm_jit
    calls = []

    def broken_verify(self):
        calls.append(1)
        if len(calls) % 2 == 0:           # the optimized module, never the input
            raise RuntimeError("Instruction does not dominate all uses!")
    monkeypatch.setattr(llvm_jit.llvm.ModuleRef, "verify", broken_verify)
    monkeypatch.setattr(llvm_jit, "_cache_dir", lambda: None)
    with pytest.raises(sl.CompileError, match="optimizer produced invalid code"):
        sl.compile(Tensor.input("x", (5,)) * 3)


def test_argument_errors_of_a_compiled_tensor_name_only_the_callers_arguments():
    x = Tensor.input("x", (3,))
    kern = sl.compile(x + Tensor(np.ones(3, np.float32)))
    with pytest.raises(sl.ArgumentError, match=r"missing argument\(s\): x; the kernel takes x$"):
        kern()
    with pytest.raises(sl.ArgumentError, match=r"unexpected argument\(s\): y; the kernel takes x$"):
        kern(x=np.ones(3, np.float32), y=1)
    with pytest.raises(sl.ArgumentError, match=r"keyword arguments only \(x=\.\.\.\); got 1 "):
        kern(np.ones(3, np.float32))
    with pytest.raises(sl.ArgumentError, match=r"kern\.time\(x=\.\.\.\)$"):
        kern.time(np.ones(3, np.float32))
    np.testing.assert_array_equal(kern(x=np.arange(3, dtype=np.float32)), [1, 2, 3])


def test_a_compiled_tensor_of_constants_only_takes_no_arguments_and_says_so():
    kern = sl.compile(Tensor(np.ones(3, np.float32)) * 2)
    with pytest.raises(sl.ArgumentError, match=r"unexpected argument\(s\): y; the kernel takes "
                                               r"no arguments$"):
        kern(y=1)
    with pytest.raises(sl.ArgumentError, match=r"the kernel takes no arguments; got 1 positional"):
        kern(1)
    with pytest.raises(sl.ArgumentError, match=r"time\(\) takes no kernel arguments"):
        kern.time(1)
    np.testing.assert_array_equal(kern(), [2, 2, 2])
