"""Index maps: reshape, permute / transpose, expand, squeeze / unsqueeze, pad, slicing
and concat. None of them copies: each maps an output index to a source index (and, for
pad / concat, selects between sources), so consumers read the source directly.
Example::

    x = Tensor(np.arange(12, dtype=np.float32))
    x.reshape(3, 4).T[1:, ::2].numpy()       # a view of x, computed in one kernel
"""
from __future__ import annotations

import builtins
import functools

import numpy as np

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.algo import types as T

from .elementwise import as_tensor, cast, promote_operands
from .tensor import Tensor, scalar_key, shape_text

_INT32_MAX = 2**31 - 1


def _const(v):
    return E.Const(int(v), T.int32)


def normalize_axis(axis, ndim, op):
    """``axis`` in ``[-ndim, ndim)`` as a non-negative int, else an AlgorithmError."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise sl.AlgorithmError(f"{op}: an axis must be an int, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise sl.AlgorithmError(f"{op}: axis {axis} is out of range for a tensor with {ndim} "
                                "dimension(s)")
    return int(axis) % max(ndim, 1)


def shape_args(shape, op):
    """Sizes given as ``f(x, 2, 3)`` or ``f(x, (2, 3))``; each must be an int."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    elif len(shape) == 1 and isinstance(shape[0], np.ndarray) and shape[0].ndim == 1:
        shape = tuple(shape[0].tolist())        # numpy takes an int array as a shape too
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise sl.AlgorithmError(f"{op}: sizes and dims must be ints, got {s!r} in "
                                    f"{tuple(shape)!r}")
    return tuple(int(s) for s in shape)


def _clamp(e, n):
    return sl.clamp(e, 0, n - 1)


# ---------------------------------------------------------------------- reshape

def _groups(src, dst):
    """Pair up runs of source and destination dims with equal products (row-major)."""
    if 0 in src or 0 in dst or not src or not dst:
        return [(list(range(len(src))), list(range(len(dst))))]
    groups, i, j = [], 0, 0
    while i < len(src) and j < len(dst):
        gi, gj = [i], [j]
        pi, pj = src[i], dst[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                gi.append(i)
                pi *= src[i]
                i += 1
            else:
                gj.append(j)
                pj *= dst[j]
                j += 1
        groups.append((gi, gj))
    groups[-1][0].extend(range(i, len(src)))   # trailing size-1 dims
    groups[-1][1].extend(range(j, len(dst)))
    return groups


def _sizes_or_keyword(op, args, kw, name):
    """The positional sizes / dims ``args``, or the same given as keyword ``name`` (numpy's
    and torch's spelling: ``reshape(shape=...)``, ``permute(dims=...)``), as ints."""
    extra = sorted(set(kw) - {name})
    if extra:
        raise sl.AlgorithmError(f"{op}: unexpected keyword argument {extra[0]!r}; {op} takes "
                                f"its {name} positionally or as {name}=")
    if name in kw:
        if args:
            raise sl.AlgorithmError(f"{op}: give the {name} either positionally or as "
                                    f"{name}=, not both")
        args = (kw[name],)
    return shape_args(args, op)


def reshape(x, *shape, **kw):
    """Row-major reshape (no copy): ``x.reshape(2, -1)`` or ``F.reshape(x, (2, 6))``.

    One ``-1`` is inferred. The source index is the unravelled flat index of the output
    index, computed per group of dims whose sizes match, e.g. (6, 4) -> (2, 3, 4) only
    divides the first index.
    """
    x = as_tensor(x, "reshape")
    # np.reshape(t, shape) calls t.reshape(shape, order="C"): row-major is what this is
    # (and with copy=, a view or a copy give the same values)
    order = kw.pop("order", "C")
    kw.pop("copy", None)
    if order not in ("C", "A"):
        raise sl.AlgorithmError(f"reshape: order={order!r} is not supported, only row-major "
                                "order='C'; for column-major, transpose first: "
                                "x.T.reshape(...).T")
    shape = _sizes_or_keyword("reshape", shape, kw, "shape")
    if shape.count(-1) > 1:
        raise sl.AlgorithmError(f"reshape{shape}: at most one dimension may be -1")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or x.size % known:
            raise sl.AlgorithmError(f"reshape: cannot reshape a tensor of shape {shape_text(x)} "
                                    f"into {shape}")
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) != x.size:
        raise sl.AlgorithmError(f"reshape: cannot reshape a tensor of shape {shape_text(x)} "
                                f"({x.size} elements) into {shape}")
    if shape == x.shape:
        return x
    if x.op == "reshape" and x.func is None:
        # a reshape of a reshape is one reshape of the first source (both are row-major):
        # a chain stays one index map instead of a div / mod per link
        return reshape(x.srcs[0], shape)
    if x.size == 0:
        # nothing is read: an index map would divide by the zero-sized dims' strides
        return Tensor.make("reshape", shape, [x], shape, x.dtype,
                           lambda idx: x.element([_const(0)] * x.ndim))
    groups = _groups(x.shape, shape)

    def index_fn(idx):
        src = [None] * x.ndim
        for gi, gj in groups:
            big = int(np.prod([shape[j] for j in gj], dtype=np.int64)) > _INT32_MAX
            flat, stride = None, 1
            for j in reversed(gj):
                if shape[j] != 1:
                    term = E.cast(T.int64, idx[j]) if big else idx[j]
                    term = term if stride == 1 else term * stride
                    flat = term if flat is None else term + flat
                stride *= shape[j]
            stride = 1
            for pos, i in enumerate(reversed(gi)):
                n = x.shape[i]
                if n == 1 or flat is None:
                    src[i] = _const(0)
                else:
                    e = flat if stride == 1 else flat // stride
                    if pos != len(gi) - 1:
                        e = e % n
                    src[i] = E.cast(T.int32, e) if big else e
                stride *= n
        return x.element(src)
    return Tensor.make("reshape", shape, [x], shape, x.dtype, index_fn)


def flatten(x, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim..end_dim`` into one (torch): ``x.flatten(1)``."""
    x = as_tensor(x, "flatten")
    if x.ndim == 0:
        return reshape(x, 1)
    a = normalize_axis(start_dim, x.ndim, "flatten")
    b = normalize_axis(end_dim, x.ndim, "flatten")
    if a > b:
        raise sl.AlgorithmError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                                f"for a tensor of shape {x.shape}")
    merged = int(np.prod(x.shape[a:b + 1], dtype=np.int64))
    return reshape(x, x.shape[:a] + (merged,) + x.shape[b + 1:])


def unsqueeze(x, dim):
    """Insert a size-1 dim at ``dim`` (torch): ``x.unsqueeze(0)``."""
    x = as_tensor(x, "unsqueeze")
    if _is_axis(dim) and not -x.ndim - 1 <= dim <= x.ndim:
        # (normalize_axis would count the new dim in the tensor's: "with 5 dimension(s)")
        raise sl.AlgorithmError(f"unsqueeze: dim {dim} is out of range for a tensor of shape "
                                f"{x.shape}; the new dim goes at a position in "
                                f"[{-x.ndim - 1}, {x.ndim}]")
    d = normalize_axis(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def squeeze(x, dim=None, *, axis=None):
    """Drop size-1 dims (all, or the given one / tuple): ``x.squeeze(0)``; numpy's
    ``axis=`` (``np.squeeze(t, axis=0)`` calls ``t.squeeze(axis=0)``) is ``dim``."""
    x = as_tensor(x, "squeeze")
    if axis is not None:
        if dim is not None:
            raise sl.AlgorithmError("squeeze: give dim= or axis=, not both")
        dim = axis
    if dim is None:
        dims = [d for d, n in enumerate(x.shape) if n == 1]
    else:
        dims = [normalize_axis(d, x.ndim, "squeeze")
                for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    return reshape(x, tuple(n for d, n in enumerate(x.shape) if d not in dims or n != 1))


# ---------------------------------------------------------------------- permute / expand

def permute(x, *dims, **kw):
    """Reorder dims (no copy): ``x.permute(0, 2, 1)``; output dim ``d`` is source dim
    ``dims[d]``, as torch / ``np.transpose(x, dims)``."""
    x = as_tensor(x, "permute")
    dims = _sizes_or_keyword("permute", dims, kw, "dims")
    norm = [normalize_axis(d, x.ndim, "permute") for d in dims]
    if sorted(norm) != list(range(x.ndim)):
        raise sl.AlgorithmError(f"permute{dims}: not a permutation of the {x.ndim} dims of a "
                                f"tensor of shape {x.shape}")
    if norm == list(range(x.ndim)):
        return x
    if x.op == "permute" and x.func is None:
        # a permute of a permute is one permute (x.T.T is x itself)
        return permute(x.srcs[0], [x.params[d] for d in norm])
    shape = tuple(x.shape[d] for d in norm)

    def index_fn(idx):
        src = [None] * x.ndim
        for out_d, in_d in enumerate(norm):
            src[in_d] = idx[out_d]
        return x.element(src)
    return Tensor.make("permute", tuple(norm), [x], shape, x.dtype, index_fn)


def transpose(x, dim0=None, dim1=None, *more, axes=None):
    """Swap two dims (no copy, torch): ``x.transpose(0, 1)``. Without dims it reverses
    them all, as numpy's ``x.transpose()`` (for 2-D: the matrix transpose). A full axis
    order, as numpy's ``transpose(axes)``, is a permute: ``x.transpose((2, 0, 1))`` or
    ``x.transpose(2, 0, 1)``."""
    x = as_tensor(x, "transpose")
    if axes is not None:            # numpy's keyword
        if dim0 is not None or dim1 is not None or more:
            raise sl.AlgorithmError("transpose: give the axes either positionally or as "
                                    "axes=, not both")
        return permute(x, *axes)
    if dim0 is None and dim1 is None and not more:
        return permute(x, *reversed(range(x.ndim)))
    if isinstance(dim0, (tuple, list)) and dim1 is None and not more:
        return permute(x, *dim0)
    if more:
        return permute(x, dim0, dim1, *more)
    if dim1 is None:
        if x.ndim == 1:
            return permute(x, dim0)
        raise sl.AlgorithmError(f"transpose: give two dims to swap, a full axis order or none, "
                                f"got only {dim0!r} for a tensor of shape {x.shape}")
    a = normalize_axis(dim0, x.ndim, "transpose")
    b = normalize_axis(dim1, x.ndim, "transpose")
    dims = list(range(x.ndim))
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, *dims)


def expand(x, *shape, **kw):
    """Broadcast to ``shape`` (torch ``expand``; ``-1`` keeps a dim, new dims lead).
    Example: ``Tensor(np.ones((3, 1))).expand(2, 3, 4)``."""
    x = as_tensor(x, "expand")
    shape = _sizes_or_keyword("expand", shape, kw, "size")
    lead = len(shape) - x.ndim
    if lead < 0:
        raise sl.AlgorithmError(f"expand: the target {shape} has fewer dims than the tensor "
                                f"{x.shape}")
    out = []
    for d, n in enumerate(shape):
        src = x.shape[d - lead] if d >= lead else None
        if n == -1:
            if src is None:
                raise sl.AlgorithmError(f"expand{shape}: -1 is not allowed for a new leading dim")
            n = src
        elif n < 0:
            raise sl.AlgorithmError(f"expand: size {n} in {shape} is negative; only -1 (keep "
                                    f"this dimension) is allowed")
        if src is not None and src != 1 and src != n:
            raise sl.AlgorithmError(f"expand: cannot expand shape {x.shape} to {shape} "
                                    f"(dimension {d}: {src} -> {n})")
        out.append(n)
    out = tuple(out)
    if out == x.shape:
        return x

    def index_fn(idx):
        return x.element([_const(0) if x.shape[d] == 1 and out[d + lead] != 1 else idx[d + lead]
                          for d in range(x.ndim)])
    return Tensor.make("expand", out, [x], out, x.dtype, index_fn)


# ---------------------------------------------------------------------- pad

def _pad_widths(pad_width, ndim):
    """numpy.pad's widths, broadcast as numpy does to one ``(before, after)`` pair per dim:
    ``n``, ``(n,)``, ``(before, after)``, ``((before, after),)``, ``((n,), (m,))`` or one
    pair per dim."""
    try:
        w = np.asarray(pad_width, dtype=object)
        if any(isinstance(v, (bool, float, np.floating)) for v in w.flat):
            raise ValueError        # numpy refuses non-integer widths too
        pairs = [(int(a), int(b)) for a, b in np.broadcast_to(w, (ndim, 2))]
    except (TypeError, ValueError):
        pairs = None
    if pairs is None or any(a < 0 or b < 0 for a, b in pairs):
        raise sl.AlgorithmError(f"pad: pad_width must be ((before, after), ...) with one "
                                f"non-negative pair per dimension ({ndim}), got {pad_width!r}")
    return pairs


def _pad_fills(x, value):
    """numpy.pad's ``constant_values``: one number, or numbers broadcast to one
    ``(before, after)`` pair per dim; each in ``x``'s dtype."""
    if isinstance(value, (bool, int, float, np.generic)):
        return _pad_value(x, value)
    try:
        fills = np.broadcast_to(np.asarray(value, dtype=object), (x.ndim, 2))
    except ValueError:
        raise sl.AlgorithmError(f"pad: constant_values must be a number or (before, after) "
                                f"values per dimension ({x.ndim}), got {value!r}") from None
    fills = [(_pad_value(x, a), _pad_value(x, b)) for a, b in fills]
    flat = {v for pair in fills for v in pair}
    return flat.pop() if len(flat) == 1 else tuple(fills)


def _pad_value(x, value):
    """The fill of a constant pad in ``x``'s dtype (numpy.pad keeps the array's dtype: a
    float fill of an int array is truncated)."""
    if isinstance(value, np.generic):
        value = value.item()        # a numpy scalar must not promote the result
    if not isinstance(value, (bool, int, float)):
        raise sl.AlgorithmError(f"pad: the fill value must be a number, got {value!r}")
    if x.dtype.is_bool:
        return bool(value)
    if x.dtype.is_int:
        if isinstance(value, float):
            if not np.isfinite(value):
                raise sl.AlgorithmError(f"pad: cannot fill an integer tensor ({x.dtype}) with "
                                        f"{value}")
            value = int(value)
        if not T.literal_fits(int(value), x.dtype):
            raise sl.AlgorithmError(f"pad: the fill value {value} does not fit the tensor's "
                                    f"dtype {x.dtype}")
        return int(value)
    return float(value)


def _source_index(j, a, n, mode):
    """The source index read by output index ``j`` of a dim of size ``n`` padded by ``a``
    before, for the numpy.pad ``mode`` (every result is inside [0, n))."""
    k = j - a if a else j
    if mode == "edge":
        return _clamp(k, n)
    if mode == "wrap":
        return k % n
    if mode == "reflect":           # the edge is not repeated: period 2n - 2
        if n == 1:
            return _const(0)
        m = k % (2 * n - 2)
        return _clamp(sl.select(m < n, m, 2 * n - 2 - m), n)    # (clamp: provably in range)
    m = k % (2 * n)                 # symmetric: the edge is repeated, period 2n
    return _clamp(sl.select(m < n, m, 2 * n - 1 - m), n)


PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def pad(x, pad_width, value=0, mode="constant", *, constant_values=None):
    """Padding with numpy.pad's widths and modes, as an index map (no copy):
    ``x.pad(((0, 0), (1, 2)), value=-1)``, ``F.pad(x, 1, mode="reflect")``.

    ``mode`` is ``"constant"`` (reads outside give ``value``, also spelled
    ``constant_values=`` as numpy; the source index is clamped so every read is provably
    in bounds), ``"edge"``, ``"reflect"``, ``"symmetric"`` or ``"wrap"``. The result keeps
    ``x``'s dtype, as numpy. A mode in the fill value's place is numpy's positional
    order: ``F.pad(x, 1, "edge")`` is ``np.pad(a, 1, "edge")``.
    """
    x = as_tensor(x, "pad")
    if isinstance(value, str):
        # numpy.pad's positional order, np.pad(a, 1, "edge"): the mode, not a fill value
        if mode != "constant":
            raise sl.AlgorithmError(f"pad: mode given twice ({value!r} and mode={mode!r})")
        value, mode = 0, value
    if constant_values is not None:
        if not (np.ndim(value) == 0 and value == 0):
            raise sl.AlgorithmError(f"pad: the fill value is given twice (value={value!r} and "
                                    f"constant_values={constant_values!r}); give one of them")
        value = constant_values
    if mode not in PAD_MODES:
        raise sl.AlgorithmError(f"pad: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    pairs = _pad_widths(pad_width, x.ndim)
    if all(a == 0 and b == 0 for a, b in pairs):
        return x
    shape = tuple(n + a + b for (a, b), n in zip(pairs, x.shape))
    for (a, b), n in zip(pairs, x.shape):
        if n == 0 and (a or b):
            if mode != "constant":
                raise sl.AlgorithmError(f"pad: mode {mode!r} cannot extend the empty dimension "
                                        f"of shape {x.shape} (numpy cannot either); use "
                                        "mode='constant'")
            # nothing to read: every element is a fill, as numpy.pad gives
            fill = _pad_fills(x, value)
            if isinstance(fill, tuple):
                return _pad_per_side(x, pairs, fill, shape)
            return Tensor.make("pad", (tuple(pairs), scalar_key(fill)), [x], shape, x.dtype,
                               lambda idx: sl.cast(x.dtype, fill))
    if mode != "constant":
        def index_map(idx):
            return x.element([j if a == 0 and b == 0 else _source_index(j, a, n, mode)
                              for j, (a, b), n in zip(idx, pairs, x.shape)])
        return Tensor.make("pad", (tuple(pairs), mode), [x], shape, x.dtype, index_map)
    value = _pad_fills(x, value)
    if isinstance(value, tuple):
        return _pad_per_side(x, pairs, value, shape)

    def index_fn(idx):
        inside, src = None, []
        for j, (a, b), n in zip(idx, pairs, x.shape):
            if a == 0 and b == 0:
                src.append(j)
                continue
            ok = (j >= a) & (j < a + n) if a else (j < n)
            inside = ok if inside is None else inside & ok
            src.append(_constant_pad_source(j, a, n))
        return sl.select(inside, x.element(src), value)
    return Tensor.make("pad", (tuple(pairs), scalar_key(value)), [x], shape, x.dtype, index_fn)


def _constant_pad_source(j, a, n):
    """The source index output index ``j`` reads in a dim of size ``n`` padded by ``a``
    before: clamped into the source, so every read is provably in bounds (the select
    around it gives the fill outside)."""
    return _clamp(j - a, n) if a else _clamp(j, n)


def _pad_per_side(x, pairs, fills, shape):
    """A constant pad with its own fill per dim and side: numpy pads one axis after the
    other, so where an element is outside along several axes the last one's fill wins."""
    def index_fn(idx):
        if 0 in x.shape:    # every element is outside along the empty dim: all fills
            value = sl.cast(x.dtype, 0)
        else:
            value = x.element([j if a == 0 and b == 0 else _constant_pad_source(j, a, n)
                               for j, (a, b), n in zip(idx, pairs, x.shape)])
        for j, (a, b), n, (before, after) in zip(idx, pairs, x.shape, fills):
            if b:
                value = sl.select(j >= a + n, sl.cast(x.dtype, after), value)
            if a:
                value = sl.select(j < a, sl.cast(x.dtype, before), value)
        return value
    key = tuple(scalar_key(v) for pair in fills for v in pair)
    return Tensor.make("pad", (tuple(pairs), key), [x], shape, x.dtype, index_fn)


# ---------------------------------------------------------------------- getitem

def _is_index(k):
    """An int index: a Python / numpy int or a 0-d integer array (not a bool)."""
    if isinstance(k, np.ndarray):
        return k.ndim == 0 and k.dtype.kind in "iu"
    return isinstance(k, (int, np.integer)) and not isinstance(k, bool)


def getitem(x, key):
    """Basic numpy indexing (no copy): ints (negative ok), slices (any non-zero step),
    ``None`` and ``...``. Example: ``x[0, 1:-1, ::2]``."""
    x = as_tensor(x, "getitem")
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise sl.AlgorithmError("getitem: at most one '...' in an index")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise sl.AlgorithmError(f"getitem: too many indices ({used}) for a tensor of shape "
                                f"{x.shape}")
    ellipsis = [n for n, k in enumerate(key) if k is Ellipsis]   # by identity: no Tensor ==
    if ellipsis:
        e = ellipsis[0]
        key = key[:e] + (slice(None),) * (x.ndim - used) + key[e + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - used)
    plan, shape, d = [], [], 0      # plan: ("int", v) | ("slice", start, step) | ("new",)
    for k in key:
        if k is None:
            plan.append(("new",))
            shape.append(1)
            continue
        n = x.shape[d]
        if isinstance(k, slice):
            if k.step is not None and k.step == 0:
                raise sl.AlgorithmError(f"getitem: slice step cannot be zero (dimension {d} of "
                                        f"shape {x.shape}); use a non-zero step such as ::1 or "
                                        "::-1")
            try:
                start, stop, step = k.indices(n)
            except TypeError:
                raise sl.AlgorithmError(f"getitem: slice {k!r} must have int (or None) start, "
                                        "stop and step") from None
            length = len(range(start, stop, step))
            if length <= 1:
                step = 1        # one element (or none): any step reads the same, e.g. ::2**40
            plan.append(("slice", start if length else 0, step))
            shape.append(length)
        elif _is_index(k):
            v = int(k)
            if not -n <= v < n:
                raise sl.AlgorithmError(f"getitem: index {v} is out of range for dimension {d} "
                                        f"of size {n} (shape {x.shape})")
            plan.append(("int", v % n))
        elif isinstance(k, (list, np.ndarray, Tensor)) or hasattr(k, "__array__"):
            # numpy's advanced indexing: a gather, not an index map of the source
            is_mask = str(getattr(k, "dtype", "")) in ("sl.bool", "bool", "torch.bool") or (
                isinstance(k, list) and bool(k) and all(isinstance(v, bool) for v in k))
            kind = "a boolean mask" if is_mask else "an index array"
            shape_k = tuple(getattr(k, "shape", (len(k),) if isinstance(k, list) else ()))
            raise sl.AlgorithmError(
                f"getitem: unsupported index, {kind} ({type(k).__name__} of shape {shape_k}): "
                "only basic indexing (ints, slices, None, ...) is supported; for a mask, "
                "keep the shape with F.where(mask, x, 0); for a few fixed positions, "
                "F.concat the slices x[i:i+1]")
        else:
            raise sl.AlgorithmError(f"getitem: unsupported index {k!r}; use ints, slices, None "
                                    "or ...")
        d += 1
    shape = tuple(shape)

    def index_fn(idx):
        src, o = [], 0
        for p in plan:
            if p[0] == "new":
                o += 1
            elif p[0] == "int":
                src.append(_const(p[1]))
            else:
                j = idx[o]
                o += 1
                src.append(j if p[2] == 1 and p[1] == 0 else p[1] + p[2] * j)
        return x.element(src)
    return Tensor.make("getitem", tuple(plan), [x], shape, x.dtype, index_fn)


def _int_or_none(v, what):
    if v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool)):
        return None if v is None else int(v)
    raise sl.AlgorithmError(f"slice: {what} must be an int or None, got {v!r}")


def slice_(x, *args, axis=None, start=None, stop=None, step=None):
    """Slicing as a function; ``x[key]`` is the same op (no copy). Three forms:

    - ``F.slice(x, key)``: numpy basic indexing, ``F.slice(x, (slice(1, 3), 0))`` is ``x[1:3, 0]``;
    - ``F.slice(x, axis, start, stop[, step])`` or ``F.slice(x, axis=1, start=2, stop=5)``:
      one axis, the other dims whole (``x[:, 2:5]``);
    - ``F.slice(x, starts, stops[, steps])``: one entry per dim (``x[s0:e0, s1:e1]``).
    """
    x = as_tensor(x, "slice")
    if len(args) == 1 and axis is None and start is None and stop is None and step is None:
        return getitem(x, args[0])
    if args and isinstance(args[0], (tuple, list)):
        if len(args) not in (2, 3) or axis is not None or start is not None or \
                stop is not None or step is not None:
            raise sl.AlgorithmError("slice(x, starts, stops[, steps]): give one sequence each "
                                    "for the starts, stops and (optionally) steps")
        starts, stops = list(args[0]), list(args[1])
        steps = list(args[2]) if len(args) == 3 else [None] * len(starts)
        if not len(starts) == len(stops) == len(steps) or len(starts) > x.ndim:
            raise sl.AlgorithmError(f"slice: starts {tuple(starts)}, stops {tuple(stops)} and "
                                    f"steps {tuple(steps)} need one entry per dim (at most "
                                    f"{x.ndim} for shape {x.shape})")
        return getitem(x, tuple(builtins.slice(_int_or_none(a, "a start"),
                                               _int_or_none(b, "a stop"),
                                               _int_or_none(c, "a step"))
                                for a, b, c in zip(starts, stops, steps)))
    if len(args) > 4:
        raise sl.AlgorithmError(f"slice(x, axis, start, stop, step): too many arguments "
                                f"{args!r}")
    given = list(args) + [None] * (4 - len(args))
    for n, (name, kw) in enumerate((("axis", axis), ("start", start), ("stop", stop),
                                    ("step", step))):
        if kw is not None:
            if n < len(args):
                raise sl.AlgorithmError(f"slice: {name} given twice (positionally and as "
                                        f"{name}=)")
            given[n] = kw
    ax, a, b, c = given
    if ax is None:
        raise sl.AlgorithmError("slice: give an index key (F.slice(x, key)), an axis with "
                                "start / stop / step, or sequences of starts and stops")
    ax = normalize_axis(ax, x.ndim, "slice")
    key = [builtins.slice(None)] * x.ndim
    key[ax] = builtins.slice(_int_or_none(a, "start"), _int_or_none(b, "stop"),
                             _int_or_none(c, "step"))
    return getitem(x, tuple(key))


# ---------------------------------------------------------------------- concat

def _is_axis(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


class _Unset:
    """An argument not given (None means something else); shown as its default, 0."""

    def __repr__(self):
        return "0"


_UNSET = _Unset()


def concat(tensors, *more, axis=_UNSET, dim=None):
    """Join tensors along ``axis`` (default 0; torch's ``dim=`` too; ``axis=None`` joins
    them flattened, as numpy; no copy: a select on the index), promoting dtypes as numpy.
    Example: ``F.concat([a, b], axis=1)``. The method's form works as a function too:
    ``F.concat(a, [b, c], 1)`` / ``a.concat(b, axis=1)`` join ``a, b, c``."""
    if dim is not None:
        if axis is not _UNSET:
            raise sl.AlgorithmError("concat: give axis= or dim=, not both")
        axis = dim
    more = list(more)
    # the axis given positionally (None too: numpy's flattening concatenate)
    if more and (_is_axis(more[-1]) or more[-1] is None):
        if axis is not _UNSET:
            raise sl.AlgorithmError(f"concat: axis given twice ({more[-1]} and axis={axis})")
        axis = more.pop()
    axis = 0 if axis is _UNSET else axis
    if isinstance(tensors, Tensor):
        items = [tensors]
        for m in more:
            items.extend(m if isinstance(m, (list, tuple)) else [m])
        tensors = items
    elif more or not isinstance(tensors, (list, tuple)):
        raise sl.AlgorithmError("concat: pass the tensors as one list, e.g. "
                                "F.concat([a, b], axis=0)")
    tensors = [as_tensor(t, "concat") for t in tensors]
    if not tensors:
        raise sl.AlgorithmError("concat: needs at least one tensor")
    if axis is None:
        return concat([reshape(t, (-1,)) for t in tensors], axis=0)
    if any(t.ndim == 0 for t in tensors):
        raise sl.AlgorithmError("concat: 0-d tensors cannot be joined along an axis; use "
                                "axis=None, or reshape them to (1,) first")
    first = tensors[0]
    ax = normalize_axis(axis, first.ndim, "concat")
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if d != ax):
            raise sl.AlgorithmError(f"concat(axis={axis}): shapes "
                                    f"{', '.join(str(u.shape) for u in tensors)} differ outside "
                                    "the concatenation axis")
    tensors = promote_operands(tensors)
    # the result type of every operand, empty ones too (numpy's)
    common = functools.reduce(T.promote_types, [t.dtype for t in tensors])
    given = tensors     # the graph keeps the empty ones: their inputs stay kernel arguments
    tensors = [t for t in tensors if t.shape[ax] > 0] or tensors[:1]
    tensors = [t if t.dtype == common else cast(t, common) for t in tensors]
    if len(tensors) == 1:
        only = tensors[0]
        return only if len(given) == 1 else Tensor.make(
            "concat", (ax,), given, only.shape, only.dtype, only.element)
    offsets = np.cumsum([0] + [t.shape[ax] for t in tensors]).tolist()
    shape = first.shape[:ax] + (offsets[-1],) + first.shape[ax + 1:]

    def part(t, off, idx):
        src = list(idx)
        src[ax] = _clamp(idx[ax] - off, t.shape[ax]) if off else _clamp(idx[ax], t.shape[ax])
        return t.element(src)

    def index_fn(idx):
        e = part(tensors[-1], offsets[-2], idx)
        for k in range(len(tensors) - 2, -1, -1):
            e = sl.select(idx[ax] < offsets[k + 1], part(tensors[k], offsets[k], idx), e)
        return e
    probe = E.Var("_p", tensors[0].dtype)
    for t in tensors[1:]:
        probe = sl.select(E.Var("_c", sl.bool), probe, E.Var("_p", t.dtype))
    return Tensor.make("concat", (ax,), given, shape, probe.dtype, index_fn)
