"""Round 16 probes of the frontend's default schedules at the sizes where the AVX-512 tile
choices change (16 lanes, 32 registers: 6 x 64 GEMM tiles, 64-channel conv tiles with a
shifted last column tile, 8 x 32 / 4 x 64 pointwise tiles). The same sizes are checked on
any machine; only the tile the schedule picks differs."""
import numpy as np
import pytest

import schedlang.frontend as F
from schedlang.frontend import Tensor

from .conftest import check


@pytest.mark.parametrize("m,k,n", [(6, 17, 16), (17, 33, 63), (7, 15, 65), (95, 5, 97)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_forms_around_the_register_tile(m, k, n, dtype):
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((2, m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    check((Tensor(a) @ Tensor(w).T + 1).relu(), np.maximum(a @ w.T + 1, 0), 1e-4, 1e-4)
    check(Tensor(a[0]).T.T @ Tensor(w.T.copy()), a[0] @ w.T, 1e-4, 1e-4)


@pytest.mark.parametrize("o,width", [(64, 11), (64, 17), (32, 17), (48, 13)])
def test_conv_whose_column_tile_shifts_back_over_the_last(o, width):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(o + width)
    x = rng.standard_normal((2, 3, 5, width + 2)).astype(np.float32)
    w = rng.standard_normal((o, 3, 3, 3)).astype(np.float32)
    # no bias: the conv is the output, whose schedule shifts its last column tile back
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    check(F.conv2d(Tensor(x), Tensor(w)), ref, 1e-3, 1e-3)


@pytest.mark.parametrize("o", [4, 12, 24])
def test_pointwise_conv_with_channels_the_8_row_tile_does_not_divide(o):
    rng = np.random.default_rng(o)
    x = rng.standard_normal((2, 5, 4, 16)).astype(np.float32)
    w = rng.standard_normal((o, 5, 1, 1)).astype(np.float32)
    ref = np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x)
    check(F.conv2d(Tensor(x), Tensor(w)).relu(), np.maximum(ref, 0), 1e-4, 1e-4)


@pytest.mark.parametrize("shape", [(3, 15), (2, 17), (5, 127), (2, 129)])
def test_float64_row_reductions_at_8_lane_boundaries(shape):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(shape[1]).standard_normal(shape)
    t = torch.from_numpy(a)
    check(Tensor(a).softmax(-1), torch.softmax(t, -1).numpy(), 1e-12, 1e-12)
    check(Tensor(a).layernorm(), torch.nn.functional.layer_norm(t, shape[-1:]).numpy(),
          1e-10, 1e-10)
    check(Tensor(a).max(-1, keepdims=True) + Tensor(a).sum(0), a.max(-1, keepdims=True)
          + a.sum(0), 1e-12, 1e-12)
