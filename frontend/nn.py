"""Reductions and network ops: sum / max / min / mean, matmul, softmax, log_softmax,
layernorm, conv2d, max_pool2d and avg_pool2d. Each reduction is a Func with an inline
``sl.sum`` / ``sl.maximum`` / ``sl.minimum`` over RDoms (compute_root by default);
everything around it stays inline. Semantics follow torch. Example::

    import schedlang.frontend as F
    x = F.Tensor(np.random.rand(1, 3, 8, 8).astype(np.float32))
    w = F.Tensor(np.random.rand(4, 3, 3, 3).astype(np.float32))
    y = F.conv2d(x, w, padding=1).relu().max_pool2d(2).numpy()    # (1, 4, 4, 4)
"""
from __future__ import annotations

import builtins

import numpy as np

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.algo import types as T

from . import elementwise as EW
from . import shape_ops as S
from .tensor import Tensor, fresh_name, shape_text, transposing_reads
from .winograd import winograd_conv3x3, winograd_tile

_REDUCERS = {"sum": sl.sum, "max": sl.maximum, "min": sl.minimum}


def _axes(axis, ndim, op):
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    if ndim == 0:
        # numpy and torch take axis 0 or -1 of a 0-d array: nothing to reduce
        for a in items:
            if isinstance(a, bool) or a not in (0, -1):
                S.normalize_axis(a, ndim, op)       # the usual error
        return ()
    axes = tuple(sorted({S.normalize_axis(a, ndim, op) for a in items}))
    if len(axes) != len(items):
        raise sl.AlgorithmError(f"{op}: repeated axis in {axis!r}; name each axis once")
    return axes


def _axis_alias(op, axis, keepdims, dim, keepdim):
    """torch's ``dim=`` / ``keepdim=`` spellings of ``axis=`` / ``keepdims=``."""
    if dim is not None:
        if axis is not None:
            raise sl.AlgorithmError(f"{op}: give axis= or dim=, not both")
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    if not isinstance(keepdims, (bool, np.bool_)) and not (
            isinstance(keepdims, (int, np.integer)) and keepdims in (0, 1)):
        # numpy's positional order sum(a, axis, dtype) would land a dtype here and keep
        # the dims silently
        raise sl.AlgorithmError(f"{op}: keepdims must be True or False, got {keepdims!r}; "
                                f"to reduce in another dtype, cast first: "
                                f"x.cast(sl.float64).{op}(axis)")
    return axis, bool(keepdims)


def _reduce(kind, x, axis, keepdims):
    x = EW.as_tensor(x, kind)
    axes = _axes(axis, x.ndim, kind)
    if not axes:
        return x
    if kind in ("max", "min") and any(x.shape[a] == 0 for a in axes):
        raise sl.AlgorithmError(f"{kind}: cannot reduce over an empty axis (shape {x.shape}), "
                                f"which has no {kind}; reduce over non-empty axes only")
    kept = [d for d in range(x.ndim) if d not in axes]
    shape = tuple(x.shape[d] for d in kept)

    def body(ivars):
        src, it = [None] * x.ndim, iter(ivars)
        for d in kept:
            src[d] = next(it)
        rdoms = []
        for a in axes:
            r = sl.RDom(x.shape[a], name=fresh_name("r"))
            rdoms.append(r)
            src[a] = r.as_expr()
        return _REDUCERS[kind](x.element(src), over=rdoms)
    red = Tensor.materialize(kind, (axes,), [x], shape, body)
    if not keepdims:
        return red
    kept = S.reshape(red, tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
    kept.stored_as = red        # s[x.max(-1, keepdims=True)] schedules the reduction's Func
    return kept


def _no_out(op, out):
    """numpy's ``np.sum(t)`` / ``np.max(t)`` call the method with ``out=None``: that is
    taken; an array to write into is not (a Tensor is an expression, not storage)."""
    if out is not None:
        raise sl.AlgorithmError(f"{op}: out= is not supported (a Tensor is an immutable "
                                f"expression); use the returned Tensor, y = x.{op}(...), or "
                                "compile it and pass out= to the kernel")


def _in_dtype(op, dtype):
    """The dtype of numpy's / torch's ``dtype=`` argument of a reduction, as a schedlang type."""
    try:
        return T.as_dtype(dtype)
    except sl.AlgorithmError as e:
        raise sl.AlgorithmError(f"{op}: dtype=: {e}") from None


def sum(x, axis=None, keepdims=False, *, dim=None, keepdim=None, dtype=None,  # noqa: A001
        out=None):
    """Sum over ``axis`` (None: all; int or tuple; negative ok; ``dim=`` / ``keepdim=`` as in
    torch are accepted too). Floats keep their dtype; bools and narrower integers accumulate
    in 64 bits as numpy and torch do (unsigned in uint64), float16 / bfloat16 in float32,
    float32 row and full sums of more than 1024 values in float64 (rounded once;
    ``_accumulator``). ``dtype=`` (numpy,
    torch) gives the result that type; ``out=`` is taken only as None (``np.sum(t)``).
    Example: ``x.sum(-1, keepdims=True)``."""
    axis, keepdims = _axis_alias("sum", axis, keepdims, dim, keepdim)
    _no_out("sum", out)
    x = EW.as_tensor(x, "sum")
    if dtype is not None:
        dtype = _in_dtype("sum", dtype)
        return EW.cast(sum(EW.cast(x, dtype), axis, keepdims), dtype)
    dt = x.dtype
    x = _widen_ints(x)
    wide = _accumulator(x, _axes(axis, x.ndim, "sum"))
    if wide is not None:
        total = _reduce("sum", EW.cast(x, wide), axis, keepdims)
        result = EW.cast(total, dt)
        if result.func is None:
            result.stored_as = total    # s[x.sum(-1)] schedules the wide sum's Func
        return result
    return _reduce("sum", x, axis, keepdims)


def _widen_ints(x):
    """``x`` with bools and integers narrower than 64 bits cast to int64 (unsigned ones to
    uint64), so that sums of them do not wrap; other types as they are."""
    dt = x.dtype
    if dt.is_bool or (dt.is_int and dt.bits < 64):
        return EW.cast(x, sl.uint64 if dt.is_unsigned else sl.int64)
    return x


SHORT_FLOAT32_SUM = 1024


def _accumulator(x, axes):
    """The wider float type a float sum of ``x`` over ``axes`` accumulates in, or None:
    half precision in float32 (as torch); float32 in float64 when the contiguous last axis
    is summed (row and full sums: long runs into few accumulators drift; numpy and torch
    sum those pairwise for the same reason). A column sum keeps float32, as numpy's does:
    each result adds one value per row, and its vector schedule keeps float32 speed."""
    dt = x.dtype
    if not dt.is_float or dt.bits >= 64:
        return None
    if dt.bits < 32:
        return sl.float32
    if not (x.ndim and x.ndim - 1 in axes):
        return None
    # up to SHORT_FLOAT32_SUM values stay float32: the schedule's 64 partials add at most
    # 16 each, then fold as a tree, which drifts no more than numpy's pairwise sum (its
    # leaves add 16 values into each of 8 accumulators). In float64, 8192 row sums of 256
    # took 2x torch's time, converting every value
    count = 1
    for a in axes:
        count *= x.shape[a]
    return None if count <= SHORT_FLOAT32_SUM else sl.float64


def _is_operand(v):
    """A second argument of max / min that is data, not an axis (torch's ``max(a, b)``)."""
    return isinstance(v, (Tensor, np.ndarray, float, np.floating))


def max(x, axis=None, keepdims=False, *, dim=None, keepdim=None, out=None):  # noqa: A001
    """Maximum over ``axis`` (values only): ``x.max(axis=1)``. With a Tensor (or array)
    in place of the axis it is torch's elementwise form: ``F.max(a, b)`` is
    ``F.maximum(a, b)``."""
    if _is_operand(axis):
        return EW.maximum(x, axis)
    axis, keepdims = _axis_alias("max", axis, keepdims, dim, keepdim)
    _no_out("max", out)
    return _reduce("max", x, axis, keepdims)


def min(x, axis=None, keepdims=False, *, dim=None, keepdim=None, out=None):  # noqa: A001
    """Minimum over ``axis`` (values only): ``x.min(axis=(0, 1))``. ``F.min(a, b)`` with a
    Tensor ``b`` is ``F.minimum(a, b)``, as torch."""
    if _is_operand(axis):
        return EW.minimum(x, axis)
    axis, keepdims = _axis_alias("min", axis, keepdims, dim, keepdim)
    _no_out("min", out)
    return _reduce("min", x, axis, keepdims)


def mean(x, axis=None, keepdims=False, *, dim=None, keepdim=None, dtype=None, out=None):
    """Mean over ``axis``; integers give float64 as in numpy (summed in 64 bits first), floats are
    summed and divided wide as ``sum`` is; ``dtype=`` and ``out=None`` as in ``sum``.
    Example: ``x.mean(-1)``."""
    axis, keepdims = _axis_alias("mean", axis, keepdims, dim, keepdim)
    _no_out("mean", out)
    x = EW.as_tensor(x, "mean")
    if dtype is not None:
        dtype = _in_dtype("mean", dtype)
        return EW.cast(mean(EW.cast(x, dtype), axis, keepdims), dtype)
    axes = _axes(axis, x.ndim, "mean")
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    wide = _accumulator(x, axes)
    if wide is not None:
        # accumulate and divide wide, round once
        return EW.cast(mean(EW.cast(x, wide), axes, keepdims), x.dtype)
    if x.dtype in (sl.int64, sl.uint64):
        # a 64-bit sum could wrap; numpy averages integers in float64
        return EW.div(sum(EW.cast(x, sl.float64), axes, keepdims), count)
    # sum() accumulates small integers in 64 bits (a uint8 mean must not wrap)
    return EW.div(sum(x, axes, keepdims), count)


# ---------------------------------------------------------------------- matmul

def _reads_transposed(t):
    """Whether the Tensor ``t`` (a matrix or a batch of them) reads some stored array with
    its columns along that array's rows: ``w.T`` (``t[k, j]`` is ``w[j, k]``)."""
    idx = [sl.Var(fresh_name("i")) for _ in t.shape]
    return bool(transposing_reads(t.element(idx), idx[-1].name))


def _computes(t):
    """Whether the element of the Tensor ``t`` is more than one read of a stored array
    (an Input or stored Func, through any index map): math such as ``b.relu()``."""
    e = t.element([sl.Var(fresh_name("i")) for _ in t.shape])
    return not isinstance(e, E.FuncRef)


def _is_half(*tensors):
    """True when every operand is float16 (or every one bfloat16): products and sums of
    such operands are computed in float32 and rounded once at the end, as torch does."""
    dts = {t.dtype for t in tensors}
    return len(dts) == 1 and next(iter(dts)) in (sl.float16, sl.bfloat16)


def matmul(a, b):
    """Matrix product with torch / numpy semantics: 2-D, batched N-D with broadcasting of
    the batch dims, and 1-D operands (a vector is promoted, then its dim removed).
    Example: ``(Tensor(a) @ Tensor(b)).numpy()``."""
    a, b = EW.promote_operands([EW.as_tensor(a, "matmul"), EW.as_tensor(b, "matmul")])
    if _is_half(a, b):
        # half-precision products accumulate in float32 and round once, as torch does
        return EW.cast(matmul(EW.cast(a, sl.float32), EW.cast(b, sl.float32)), a.dtype)
    if a.dtype.is_bool and b.dtype.is_bool:
        # numpy's bool product is the or of ands: whether any count of true pairs is non-zero
        return EW.cast(matmul(EW.cast(a, sl.int32), EW.cast(b, sl.int32)), sl.bool)
    if a.ndim == 0 or b.ndim == 0:
        raise sl.AlgorithmError(f"matmul: both operands need at least 1 dimension, got shapes "
                                f"{a.shape} and {b.shape}")
    a2 = S.unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = S.unsqueeze(b, -1) if b.ndim == 1 else b
    K = a2.shape[-1]
    if b2.shape[-2] != K:
        raise sl.AlgorithmError(f"matmul: shapes {shape_text(a)} and {shape_text(b)} do not "
                                f"match: the inner dimensions are {K} and {b2.shape[-2]}")
    batch = EW.broadcast_shapes(a2.shape[:-2], b2.shape[:-2], op="matmul batch dims of "
                                f"{a.shape} @ {b.shape}")
    M, N = a2.shape[-2], b2.shape[-1]
    shape = batch + (M, N)
    transposed, computed = _reads_transposed(b2), _computes(b2)
    if b2.shape[:-2] == batch and (transposed or computed):
        # a right operand read transposed (x @ w.T) or computed (x @ v.gelu()): a Func of
        # its own, which the matmul's schedule fills panel by panel with columns contiguous
        # (frontend/matmul_schedule.py), not read across rows or computed per row tile
        op = "matmul_rhs_t" if transposed else "matmul_rhs"
        b2 = Tensor.materialize(op, (), [b2], b2.shape, b2.element)
    elif computed:
        b2 = Tensor.materialize("matmul_operand", (), [b2], b2.shape, b2.element, root=True)
    if _computes(a2) or (_reads_transposed(a2) and M > 1):
        # a computed left operand (x.gelu() @ v) is stored once, not computed in the inner
        # loop for every column tile (scalar math there: 15x slower than torch); one read
        # transposed (x.T @ v) is stored transposed once (in 16 x 16 tiles), not read down
        # its columns by every tile: those reads, a row apart, all fall in one set of the
        # L1 and L2 caches (1024^3: 0.43x torch)
        a2 = Tensor.materialize("matmul_operand", (), [a2], a2.shape, a2.element, root=True)

    def body(ivars):
        bidx, i, j = ivars[:-2], ivars[-2], ivars[-1]
        k = sl.RDom(K, name=fresh_name("k"))
        ai = EW.broadcast_index(bidx, a2.shape[:-2], batch) + [i, k.as_expr()]
        bi = EW.broadcast_index(bidx, b2.shape[:-2], batch) + [k.as_expr(), j]
        # over= names k: with K == 1 a size-1 operand is read at index 0 and k vanishes
        return sl.sum(a2.element(ai) * b2.element(bi), over=[k])
    out = Tensor.materialize("matmul", (), [a2, b2], shape, body)
    if a.ndim == 1:
        out = S.squeeze(out, -2)
    if b.ndim == 1:
        out = S.squeeze(out, -1)
    return out


# ---------------------------------------------------------------------- softmax family

def _softmax_axis(op, x, axis, dim):
    """The axis of a softmax given as ``axis`` or torch's ``dim`` (not both; default -1),
    normalised; a 0-d tensor takes -1 or 0, as torch."""
    if dim is not None and axis is not None:
        raise sl.AlgorithmError(f"{op}: give axis= or dim=, not both")
    axis = -1 if axis is None and dim is None else (dim if axis is None else axis)
    if x.ndim == 0 and axis in (-1, 0) and not isinstance(axis, bool):
        return 0
    return S.normalize_axis(axis, x.ndim, op)


def _softmax_family(op, body, x, axis, dim, dtype=None):
    """``body(x, axis)`` of a softmax-like op along ``axis`` / ``dim``: a 0-d tensor as
    one element, an empty axis as an empty result (torch's), half precision in float32;
    ``dtype``: torch's, the type ``x`` is cast to first."""
    x = EW.as_tensor(x, op)
    if dtype is not None:
        x = EW.cast(x, dtype)
    axis = _softmax_axis(op, x, axis, dim)
    if x.dtype.is_bool:
        raise sl.AlgorithmError(f"{op}: the input is bool, which has no {op} (torch refuses it "
                                f"too); cast it first, e.g. {op}(x.cast(sl.float32))")
    if x.dtype.is_int:
        # numpy's float type of the integers first: ``x - max`` in the integer type wraps
        # (a uint8 row [3, 0] gives 0 - 3 = 253)
        x = EW.cast(x, EW._numpy_float(x.dtype))
    if x.ndim == 0:
        return S.reshape(_softmax_family(op, body, S.reshape(x, (1,)), 0, None), ())
    if x.shape[axis] == 0:
        return x if x.dtype.is_float else EW.cast(x, sl.float32)
    return EW.in_float32(body, x, axis)


def softmax(x, axis=None, *, dim=None, dtype=None):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (or torch's ``dim=``; default
    the last); the exponentials are stored once (compute_root); float16 / bfloat16 in
    float32; ``dtype`` (torch's): cast ``x`` to it first. Example: ``x.softmax(-1)``."""
    return _softmax_family("softmax", _softmax, x, axis, dim, dtype)


def _softmax(x, axis):
    m = max(x, axis, keepdims=True)
    z = EW.exp(EW.sub(x, m))
    e = Tensor.materialize("softmax_exp", (), [z], z.shape, z.element, root=True)
    den = _reduce("sum", e, axis, True)     # exponentials in (0, 1]: summed in float32
    if axis != x.ndim - 1 or x.ndim < 2 or x.dtype not in (sl.float32, sl.float64):
        return EW.div(e, den)
    # rows along the last axis: one Func the default schedule knows (a row at a time, the
    # exponentials and both reductions computed per row, in cache)
    q = EW.div(e, den)
    return Tensor.materialize("softmax", (axis,), [q], q.shape, q.element)


def log_softmax(x, axis=None, *, dim=None, dtype=None):
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (or ``dim=``; default the
    last), float16 / bfloat16 in float32; ``dtype`` as softmax's: ``x.log_softmax(-1)``."""
    return _softmax_family("log_softmax", _log_softmax, x, axis, dim, dtype)


def _log_softmax(x, axis):
    z = EW.sub(x, max(x, axis, keepdims=True))
    return EW.sub(z, EW.log(_reduce("sum", EW.exp(z), axis, True)))


def _layernorm(op, x, shape, weight, bias, eps):
    """Normalise ``x`` over its trailing dims ``shape`` (biased variance, as torch)."""
    k = len(shape)
    if x.ndim < k or x.shape[x.ndim - k:] != shape or k == 0:
        raise sl.AlgorithmError(f"{op}: normalized_shape {shape} must be the trailing dims of the "
                                f"input (shape {x.shape}) and not empty")
    weight = None if weight is None else EW.as_tensor(weight, f"{op} weight")
    bias = None if bias is None else EW.as_tensor(bias, f"{op} bias")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != shape:
            raise sl.AlgorithmError(f"{op}: {name} has shape {p.shape}, expected {shape} for "
                                    f"input of shape {x.shape}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise sl.AlgorithmError(f"{op}: eps must be a number, got {eps!r}")
    return EW.in_float32(_normalize, x, k, weight, bias, float(eps))


def _normalize(x, k, weight, bias, eps):
    axes = tuple(range(x.ndim - k, x.ndim))
    xc = EW.sub(x, mean(x, axes, keepdims=True))
    var = mean(EW.mul(xc, xc), axes, keepdims=True)
    out = EW.mul(xc, EW.rsqrt(EW.add(var, eps)))
    if weight is not None:
        out = EW.mul(out, weight)
    if bias is not None:
        out = EW.add(out, bias)
    if k != 1 or x.ndim < 2 or x.dtype not in (sl.float32, sl.float64):
        return out
    # rows along the last axis: one Func the default schedule knows (a row at a time, both
    # sums computed per row, in cache); stored where it feeds other ops, which would
    # otherwise recompute it (and the layers before it) at each of their reads
    return Tensor.materialize("layernorm", (), [out], out.shape, out.element, root=True)


def layernorm(x, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the last axis (torch ``layer_norm``, biased variance):
    ``(x - mean) / sqrt(var + eps) * weight + bias``. Example: ``x.layernorm(w, b)``."""
    x = EW.as_tensor(x, "layernorm")
    if x.ndim == 0:
        raise sl.AlgorithmError("layernorm: needs at least one dimension")
    return _layernorm("layernorm", x, x.shape[-1:], weight, bias, eps)


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps=1e-5):
    """torch's ``layer_norm(x, normalized_shape, weight, bias, eps)``: normalise over the
    trailing dims ``normalized_shape`` (an int or a tuple; None: the last axis). A Tensor
    or array in its place is the weight, as ``layernorm(x, weight, bias, eps)``.
    Example: ``F.layer_norm(x, (64,), w, b)`` or ``x.layer_norm(x.shape[-1:])``."""
    x = EW.as_tensor(x, "layer_norm")
    if isinstance(normalized_shape, (Tensor, np.ndarray)):
        # the layernorm(x, weight, bias, eps) form: each argument sits one place earlier
        if isinstance(bias, (int, float)) and not isinstance(bias, bool):
            eps = bias
        return layernorm(x, normalized_shape, weight, eps)
    if x.ndim == 0:
        raise sl.AlgorithmError("layer_norm: needs at least one dimension")
    if normalized_shape is None:
        shape = x.shape[-1:]
    else:
        items = normalized_shape if isinstance(normalized_shape, (tuple, list)) \
            else (normalized_shape,)
        shape = S.shape_args((tuple(items),), "layer_norm normalized_shape")
    return _layernorm("layer_norm", x, shape, weight, bias, eps)


# ---------------------------------------------------------------------- convolution / pooling

def _pair(v, what):
    items = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(items) != 2 or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                  for a in items):
        raise sl.AlgorithmError(f"{what} must be an int or a pair of ints, got {v!r}")
    return int(items[0]), int(items[1])


def _conv_padding(padding, kernel, dilation, stride):
    """``((top, bottom), (left, right))`` from an int, a pair, ``"valid"`` or ``"same"``
    (torch: stride 1 only; an odd total puts the extra row / column at the end)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise sl.AlgorithmError(f"conv2d: padding='same' needs stride 1 (got stride "
                                        f"{stride}), as in torch; give the padding as ints")
            return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                         for k, d in zip(kernel, dilation))
        raise sl.AlgorithmError(f"conv2d: padding {padding!r} is not 'same', 'valid', an int or "
                                "a pair of ints")
    ph, pw = _pair(padding, "conv2d padding")
    return (ph, ph), (pw, pw)


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution as torch (cross-correlation): ``x`` is (N, C, H, W) (or unbatched
    (C, H, W)), ``w`` is (O, C // groups, KH, KW), optional ``bias`` (O,). ``padding`` is
    an int, a pair, ``"valid"`` or ``"same"``; zero padding is an index map.
    Example: ``F.conv2d(x, w, stride=2, padding=1, groups=2)``."""
    x, w = EW.as_tensor(x, "conv2d"), EW.as_tensor(w, "conv2d")
    if x.ndim == 3 and w.ndim == 4:
        # an unbatched (C, H, W) input, as torch accepts: a batch of one
        out = conv2d(S.unsqueeze(x, 0), w, bias, stride, padding, dilation, groups)
        return S.squeeze(out, 0)
    if x.ndim != 4 or w.ndim != 4:
        raise sl.AlgorithmError(f"conv2d: needs x (N, C, H, W) or (C, H, W) and w (O, C/groups, "
                                f"KH, KW), got shapes {x.shape} and {w.shape}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise sl.AlgorithmError(f"conv2d: groups must be an int >= 1, got {groups!r}")
    x, w = EW.promote_operands([x, w])
    if _is_half(x, w):
        # half precision: products, sums and the bias in float32 (torch), rounded once to
        # the type conv2d(x, w) + bias has (a float32 / float64 bias widens the result)
        b = None if bias is None else EW.as_tensor(bias, "conv2d")
        dtype = x.dtype if b is None else EW.result_dtype(x.dtype, b.dtype)
        wide = conv2d(EW.cast(x, sl.float32), EW.cast(w, sl.float32), b, stride, padding,
                      dilation, groups)
        return wide if wide.dtype == dtype else EW.cast(wide, dtype)
    if x.dtype != w.dtype and EW.result_dtype(x.dtype, w.dtype) == sl.float32:
        # mixed operands whose products are float32 anyway (float16 or int8 images, float32
        # weights): converted first, exactly as each product would be, so the conv takes
        # its float32 forms (Winograd, NHWC, pointwise) rather than the generic sum
        return conv2d(EW.cast(x, sl.float32), EW.cast(w, sl.float32), bias, stride, padding,
                      dilation, groups)
    if x.dtype.is_bool and w.dtype.is_bool:
        # numpy's bool product is the or of ands (as matmul): whether any count is non-zero
        counts = conv2d(EW.cast(x, sl.int32), EW.cast(w, sl.int32), None, stride, padding,
                        dilation, groups)
        return _conv_bias(EW.cast(counts, sl.bool), bias, w.shape[0])
    (sh, sw), (dh, dw) = _pair(stride, "conv2d stride"), _pair(dilation, "conv2d dilation")
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    if KH == 0 or KW == 0:
        raise sl.AlgorithmError(f"conv2d: the kernel of w (shape {w.shape}) is {KH}x{KW}; its "
                                "height and width must be >= 1, as torch requires")
    (pt, pb), (pl, pr) = _conv_padding(padding, (KH, KW), (dh, dw), (sh, sw))
    if groups < 1 or C % groups or O % groups or Cg != C // groups:
        raise sl.AlgorithmError(f"conv2d: input {shape_text(x)} and weight {shape_text(w)} do "
                                f"not match with groups={groups} (need C = {Cg} * groups and O "
                                "divisible by groups)")
    if builtins.min(sh, sw, dh, dw) < 1 or builtins.min(pt, pb, pl, pr) < 0:
        raise sl.AlgorithmError(f"conv2d: stride and dilation must be >= 1 and padding >= 0, got "
                                f"stride={stride!r}, dilation={dilation!r}, padding={padding!r}")
    Ho = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    Wo = (W + pl + pr - dw * (KW - 1) - 1) // sw + 1
    if Ho <= 0 or Wo <= 0:
        raise sl.AlgorithmError(f"conv2d: the kernel {w.shape[2:]} (dilation {(dh, dw)}) does not "
                                f"fit the padded input {(H + pt + pb, W + pl + pr)}")
    if 1 < groups <= 4 and Cg % 16 == 0 and (O // groups) % 16 == 0 and x.dtype == sl.float32 \
            and w.dtype == sl.float32:
        # a few groups of many channels: each group's conv takes the float32 forms of a
        # whole conv (Winograd, NHWC), side by side (64 -> 64 channels, 3x3, 2 groups, 56^2:
        # 4.0 -> 1.5 ms on one thread, torch 2.3; the generic sum ran all groups at once)
        og = O // groups
        parts = [conv2d(x[:, g * Cg:(g + 1) * Cg], w[g * og:(g + 1) * og], None, stride,
                        padding, dilation, 1) for g in range(groups)]
        return _conv_bias(S.concat(parts, axis=1), bias, O)
    pads = ((pt, pb), (pl, pr))
    xp = S.pad(x, ((0, 0), (0, 0)) + pads)
    if pt or pb or pl or pr:
        # the zero-padded input is stored once, so the inner loop reads it without tests
        xp = Tensor.materialize("padded", (pads,), [xp], xp.shape, xp.element, root=True)
    Og = O // groups
    params = ((sh, sw), pads, (dh, dw), groups)

    def window(n, h, ww, r, c):
        """x's element under kernel tap (r.y, r.z) for output pixel (h, ww)."""
        return xp.element([n, c, h * sh + r.y * dh if sh != 1 or dh != 1 else h + r.y,
                           ww * sw + r.z * dw if sw != 1 or dw != 1 else ww + r.z])
    pointwise = groups == 1 and KH == KW == 1 and (sh, sw, dh, dw) == (1, 1, 1, 1) and \
        not any((pt, pb, pl, pr)) and x.dtype == sl.float32 and w.dtype == sl.float32
    if pointwise and ((Ho * Wo) % 64 or O % 4):
        # a plane the fused-plane schedule below does not tile (14 x 14, 7 x 7): the weights
        # times each image plane as a (batched) matmul, whose schedule takes any size
        planes = matmul(S.reshape(w, (O, C)), S.reshape(x, (N, C, Ho * Wo)))
        return _conv_bias(S.reshape(planes, (N, O, Ho, Wo)), bias, O)
    if pointwise:
        # a 1x1 conv is a matrix product of the weights and each image plane: its default
        # schedule (frontend/matmul_schedule.py) runs the plane as one fused loop
        def body_pointwise(iv):
            n, o, h, ww = iv
            r = sl.RDom(C, name=fresh_name("r"))
            return sl.sum(w.element([o, r, 0, 0]) * x.element([n, r, h, ww]), over=[r])
        out = Tensor.materialize("conv2d_pointwise", params, [x, w], (N, O, Ho, Wo),
                                 body_pointwise)
        return _conv_bias(out, bias, O)
    fp32 = x.dtype == sl.float32 and w.dtype == sl.float32
    if groups == 1 and KH == KW == 3 and (sh, sw, dh, dw) == (1, 1, 1, 1) and fp32:
        m = winograd_tile(C, O, Ho, Wo)
        if m:
            return _conv_bias(_winograd_conv(x, w, pads, (N, C, Ho, Wo, O), params, m), bias, O)
    if groups == 1 and O % 16 == 0 and fp32:
        # the fast form: weights transposed so output channels are contiguous, the sums
        # computed with channels innermost (NHWC), then read out as NCHW; the default
        # schedule vectorizes the output channels (frontend/matmul_schedule.py)
        wt = Tensor.materialize("conv2d_weights", (), [w], (C, KH, KW, O),
                                lambda iv: w.element([iv[3], iv[0], iv[1], iv[2]]), root=True)

        def body_nhwc(iv):
            n, h, ww, o = iv
            r = sl.RDom(C, KH, KW, name=fresh_name("r"))
            return sl.sum(window(n, h, ww, r, r.x) * wt.element([r.x, r.y, r.z, o]), over=[r])
        acc = Tensor.materialize("conv2d_nhwc", params, [xp, wt], (N, Ho, Wo, O), body_nhwc)
        out = Tensor.materialize("conv2d", params, [acc], (N, O, Ho, Wo),
                                 lambda iv: acc.element([iv[0], iv[2], iv[3], iv[1]]))
        return _conv_bias(out, bias, O)

    def body(iv):
        n, o, h, ww = iv
        r = sl.RDom(Cg, KH, KW, name=fresh_name("r"))
        c = r.x if groups == 1 else (o // Og) * Cg + r.x
        return sl.sum(window(n, h, ww, r, c) * w.element([o, r.x, r.y, r.z]), over=[r])
    out = Tensor.materialize("conv2d", params, [xp, w], (N, O, Ho, Wo), body)
    return _conv_bias(out, bias, O)


def _winograd_conv(x, w, pads, shape, params, m):
    """A 3x3 stride-1 conv in the Winograd form F(m x m, 3 x 3) (``frontend/winograd.py``;
    its schedule is the default one of the ``conv2d_winograd`` op)."""
    (pt, _), (pl, _) = pads
    N, C, Ho, Wo, O = shape
    H, W = x.shape[2:]

    def build(out):
        # zero padding down to the last whole tile: it reads past the output's own window
        rows, cols = -(-Ho // m) * m + 2, -(-Wo // m) * m + 2
        xp = S.pad(x, ((0, 0), (0, 0), (pt, rows - H - pt), (pl, cols - W - pl)))
        winograd_conv3x3(lambda n, c, yy, xx: xp.element([n, c, yy, xx]),
                         lambda k, c, i, j: w.element([k, c, i, j]), shape, m=m,
                         name=out.name, out=out)
    # its many transform expressions are built only when the graph is compiled: an eager
    # call whose kernel is cached does not pay for them (30 ms at 64 channels)
    return Tensor.deferred("conv2d_winograd", params + (m,), [x, w], (N, O, Ho, Wo), x.dtype,
                           fresh_name("conv2d_winograd"), build)


def _conv_bias(out, bias, O):
    """``out`` plus the per-channel ``bias`` (None: ``out`` itself)."""
    if bias is not None:
        b = EW.as_tensor(bias, "conv2d")
        if b.shape != (O,):
            raise sl.AlgorithmError(f"conv2d: bias has shape {b.shape}, expected ({O},)")
        out = EW.add(out, S.reshape(b, (O, 1, 1)))
    return out


def _pool_extent(n, k, s, p, d, ceil_mode):
    """torch's pooled size of a dim of ``n`` (kernel k, stride s, padding p, dilation d):
    with ``ceil_mode`` a partial last window counts if it starts inside the input or the
    left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool(kind, x, kernel_size, stride, padding, dilation=1, ceil_mode=False,
          count_include_pad=True, divisor_override=None):
    x = EW.as_tensor(x, kind)
    if x.ndim < 2:
        raise sl.AlgorithmError(f"{kind}: needs at least 2 dims (..., H, W), got shape {x.shape}")
    kh, kw = _pair(kernel_size, f"{kind} kernel_size")
    sh, sw = _pair(kernel_size if stride is None else stride, f"{kind} stride")
    ph, pw = _pair(padding, f"{kind} padding")
    dh, dw = _pair(dilation, f"{kind} dilation")
    if builtins.min(kh, kw) < 1 or builtins.min(sh, sw) < 1 or builtins.min(dh, dw) < 1:
        # avg_pool2d has no dilation argument: its message names only what it takes
        names, got = ("kernel_size and stride", f"kernel_size={kernel_size!r}, stride={stride!r}")
        if kind == "max_pool2d":
            names, got = "kernel_size, stride and dilation", f"{got}, dilation={dilation!r}"
        raise sl.AlgorithmError(f"{kind}: {names} must be >= 1, got {got}")
    if ph > kh // 2 or pw > kw // 2 or builtins.min(ph, pw) < 0:
        raise sl.AlgorithmError(f"{kind}: padding {(ph, pw)} must be >= 0 and at most half the "
                                f"kernel size {(kh, kw)}")
    if divisor_override is not None and (isinstance(divisor_override, bool) or not isinstance(
            divisor_override, (int, np.integer)) or divisor_override < 1):
        raise sl.AlgorithmError(f"{kind}: divisor_override must be None or an int >= 1, got "
                                f"{divisor_override!r}")
    H, W = x.shape[-2:]
    Ho = _pool_extent(H, kh, sh, ph, dh, ceil_mode)
    Wo = _pool_extent(W, kw, sw, pw, dw, ceil_mode)
    if Ho <= 0 or Wo <= 0:
        raise sl.AlgorithmError(f"{kind}: kernel {(kh, kw)} (dilation {(dh, dw)}) is larger than "
                                f"the padded input {(H + 2 * ph, W + 2 * pw)}")
    if kind == "max_pool2d":
        value = -float("inf") if x.dtype.is_float else x.dtype.min_value()
    else:
        value = 0
    # ceil_mode's last window may reach past the right padding: pad that far (it reads
    # the same -inf / 0, and the divisor below leaves it out as torch does)
    rh = builtins.max(ph, (Ho - 1) * sh + dh * (kh - 1) + 1 - H - ph)
    rw = builtins.max(pw, (Wo - 1) * sw + dw * (kw - 1) + 1 - W - pw)
    lead = x.ndim - 2
    xp = S.pad(x, ((0, 0),) * lead + ((ph, rh), (pw, rw)), value=value)

    def body(iv):
        r = sl.RDom(kh, kw, name=fresh_name("r"))
        e = xp.element(list(iv[:-2]) + [iv[-2] * sh + (r.x * dh if dh != 1 else r.x),
                                        iv[-1] * sw + (r.y * dw if dw != 1 else r.y)])
        # over= names r: a broadcast input (expand, a size-1 view) may not read by it
        return sl.maximum(e, over=[r]) if kind == "max_pool2d" else sl.sum(e, over=[r])
    params = ((kh, kw), (sh, sw), (ph, pw), (dh, dw), bool(ceil_mode), bool(count_include_pad),
              divisor_override)
    out = Tensor.materialize(kind, params, [xp], x.shape[:-2] + (Ho, Wo), body)
    if kind == "max_pool2d":
        return out
    if divisor_override is not None:
        return EW.div(out, int(divisor_override))
    full_windows = not ceil_mode or (rh == ph and rw == pw)
    if count_include_pad and full_windows:
        return EW.div(out, kh * kw)
    return _avg_divide(out, params, (H, W))


def _avg_divide(total, params, size):
    """``total`` divided per output pixel by torch's avg_pool2d divisor: the window's
    extent clipped to the padded input (``count_include_pad``) or to the input itself."""
    (kh, kw), (sh, sw), (ph, pw), _, _, include_pad, _ = params
    # integer sums divide in float64, as numpy's true division (and the plain path) does
    dt = total.dtype if total.dtype.is_float else sl.float64

    def extent(o, k, s, p, n):
        start = o * s - p
        if include_pad:
            return sl.min(start + k, n + p) - start
        return sl.min(start + k, n) - sl.max(start, 0)

    def index_fn(idx):
        count = extent(idx[-2], kh, sh, ph, size[0]) * extent(idx[-1], kw, sw, pw, size[1])
        return sl.cast(dt, total.element(idx)) / sl.cast(dt, count)
    return Tensor.make("avg_pool2d_divide", params, [total], total.shape, dt, index_fn)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling over the last two dims (torch; padding reads -inf, stride defaults to
    the kernel size; ``dilation`` and ``ceil_mode`` as torch; ``return_indices`` must be
    False). Example: ``x.max_pool2d(3, stride=2, padding=1)``."""
    if return_indices is not False:
        raise sl.AlgorithmError(f"max_pool2d: return_indices={return_indices!r} is not "
                                "supported; only the pooled values are computed")
    return _pool("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average pooling over the last two dims (torch: by default ``count_include_pad=True``,
    padded zeros count; ``ceil_mode`` and ``divisor_override`` as torch).
    Example: ``x.avg_pool2d(2)`` or ``F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)``."""
    x = EW.as_tensor(x, "avg_pool2d")
    if _is_half(x):
        # half precision: summed and divided in float32, rounded once (torch)
        return EW.cast(avg_pool2d(EW.cast(x, sl.float32), kernel_size, stride, padding,
                                  ceil_mode, count_include_pad, divisor_override), x.dtype)
    # integer windows are summed in 64 bits (as mean's) and divided in float64
    return _pool("avg_pool2d", _widen_ints(x), kernel_size, stride, padding, 1, ceil_mode,
                 count_include_pad, divisor_override)
