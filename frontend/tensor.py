"""The lazy ``Tensor`` of the frontend, its graph key, default schedule and kernel cache.

A Tensor is a node of an expression graph: a shape (tuple of ints), a dtype and a
function ``index_fn(idx) -> Expr`` giving the algorithm expression of one element at
the index expressions ``idx``. Ops that need their own storage (reductions, matmul,
values used many times) also carry a materialized ``sl.Func``. Nothing here emits
loops: ``.numpy()`` builds an output Func and a default Schedule, compiles them with
``sl.compile`` (cached by the graph's structure) and runs the kernel. Example::

    from schedlang.frontend import Tensor
    x = Tensor(np.ones((4, 8), np.float32))
    y = (x * 2 + 1).numpy()                 # eager: build, compile, run
    a = Tensor.input("a", (4, 8))           # named input for sl.compile
    kern = sl.compile(a.exp()); out = kern(a=np.zeros((4, 8), np.float32))
"""
from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import threading

import numpy as np

import schedlang as sl
from schedlang.algo import expr as E
from schedlang.algo import types as T
from schedlang.deep_recursion import deep_recursion
from schedlang.autotune.integration import choose_schedule, tuning_state
from schedlang.targets.kernel import default_threads

from .reduction_schedule import worth_parallel

_names = itertools.count()

# An inline element expression whose tree (shared sub-expressions counted each time they
# are used, as the algorithm language walks them) grows beyond this is stored in its own
# compute_root Func, so that chains like ``x.gelu().gelu()...`` stay linear in size.
MAX_INLINE_NODES = 64


def with_argument_check(fn, op, bound_first=False):
    """``fn``, whose calls with arguments its signature cannot take raise an
    ``sl.AlgorithmError`` naming the op and its signature (Python's own TypeError would not
    say which op, nor that the mistake is in a schedlang call). Example:
    ``pad = with_argument_check(pad, "pad")``; ``x.pad(1, foo=1)`` then says
    ``pad: got an unexpected keyword argument 'foo'; it takes pad(x, pad_width, ...)``.
    ``bound_first``: ``fn``'s first parameter is bound for the user (a classmethod's cls)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters)
    shown = sig.replace(parameters=list(sig.parameters.values())[1:]) if bound_first else sig
    # torch's keyword names of the operands: F.relu(input=x), F.conv2d(input=x, weight=w)
    aliases = {} if bound_first or not params else {"input": params[0]}
    if params[:2] == ["x", "w"]:
        aliases["weight"] = "w"
    aliases = {k: v for k, v in aliases.items() if k not in params}

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        for torch_name, name in aliases.items():
            if torch_name in kwargs and name not in kwargs:
                kwargs[name] = kwargs.pop(torch_name)
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise sl.AlgorithmError(f"{op}: {e}; it takes {op}{shown}") from None
        return fn(*args, **kwargs)
    return checked


def shape_text(t) -> str:
    """``t``'s shape for a message, with its name when the user gave it one:
    ``shape_text(Tensor.input("A", (3, 4)))`` is ``"(3, 4) of A"``."""
    shape = tuple(getattr(t, "shape", ()))
    name = getattr(t, "user_name", None)
    return f"{shape} of {name}" if name else str(shape)


def tree_size(e, memo=None) -> int:
    """Number of nodes of expression ``e`` counted as a tree (linear time on the DAG)."""
    memo = {} if memo is None else memo
    stack = [(e, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in memo:
            continue
        if ready:
            memo[id(n)] = 1 + sum(memo[id(k)] for k in n.kids())
            continue
        stack.append((n, True))
        stack.extend((k, False) for k in n.kids() if id(k) not in memo)
    return memo[id(e)]


# names users gave Tensor.input: a generated name skips them (an input named "sum0"
# must not meet the frontend's own sum0)
_user_names = set()
_constant_names = set()     # the Input names given to constants (Tensor(array))


def fresh_name(prefix: str) -> str:
    """A Func / Input name unique in this process and unlike any input's, e.g. ``matmul7``."""
    while True:
        name = f"{prefix}{next(_names)}"
        if name not in _user_names:
            return name


def scalar_key(v):
    """A hashable key of a Python / numpy scalar that keeps its type (1, 1.0, True differ)."""
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, repr(v.item()))
    return (type(v).__name__, repr(v))


def _values_of(data):
    """``data`` as something numpy can read: a torch tensor that requires grad is detached
    and a pending (lazy) negation is applied, as ``torch.tensor(t)`` does; numpy's own
    conversion refuses both with a RuntimeError. Anything else as it is."""
    if getattr(data, "requires_grad", False) is True and callable(getattr(data, "detach", None)):
        data = data.detach()        # a constant's values; no gradient flows through them
    is_neg = getattr(data, "is_neg", None)
    if callable(is_neg) and is_neg() is True and callable(getattr(data, "resolve_neg", None)):
        data = data.resolve_neg()
    return data


def is_scalar(v) -> bool:
    """True for Python numbers / bools and numpy scalars (operands that are not Tensors)."""
    return isinstance(v, (bool, int, float, np.generic))


class Tensor:
    """A lazy n-dimensional array whose ops build schedlang algorithm Funcs.

    ``Tensor(array)`` wraps a numpy array (or anything ``np.asarray`` takes) as an eager
    constant input; ``Tensor.input(name, shape, dtype)`` makes a named kernel input.
    Ops (``+``, ``@``, ``.sum()``, ``.softmax()``, ...) return new Tensors without
    computing anything; ``.numpy()`` computes. Example::

        t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        t.sum(axis=1).numpy()            # array([ 3., 12.], dtype=float32)
    """

    __array_ufunc__ = None   # numpy arrays on the left of an operator defer to Tensor

    def __init__(self, data):
        if str(getattr(data, "dtype", "")) == "torch.bfloat16":
            # numpy has no bfloat16: the values travel as float32 (exact) and are cast back
            from .elementwise import cast
            wide = Tensor(data.detach().cpu().float().numpy())
            self.__dict__.update(cast(wide, sl.bfloat16).__dict__)
            return
        try:
            arr = np.asarray(_values_of(data))
        except Exception as e:   # noqa: BLE001 - whatever another library's array raises
            raise sl.AlgorithmError(f"Tensor: cannot make an array of {type(data).__name__} "
                                    f"data ({e}); give a numpy array or a rectangular nested "
                                    "list of numbers") from None
        if not arr.dtype.isnative:   # big-endian data: the same values in this machine's order
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if arr.ndim:         # (np.ascontiguousarray would make a 0-d array 1-d)
            arr = np.ascontiguousarray(arr)
        dtype = T.from_numpy(arr.dtype)
        name = fresh_name("_c")
        _constant_names.add(name)
        stored = arr.reshape(arr.shape or (1,))
        inp = sl.Input(name, dtype, stored.shape)
        if arr.ndim == 0:
            fn = lambda idx: inp[0]  # noqa: E731
        else:
            fn = lambda idx: inp[tuple(idx)]  # noqa: E731
        self._init("const", (), (), tuple(int(s) for s in arr.shape), dtype, fn)
        self.input_node, self.array = inp, stored

    # ------------------------------------------------------------------ construction
    user_name = None    # the name given to Tensor.input (others have none a user knows)
    stored_as = None    # the stored Tensor this view of an op's result stands for in s[...]

    def _init(self, op, params, srcs, shape, dtype, index_fn, func=None, root=False):
        self.op, self.params, self.srcs = op, params, tuple(srcs)
        self.shape, self.dtype, self.index_fn = tuple(int(s) for s in shape), dtype, index_fn
        for d, n in enumerate(self.shape):
            if n > T.MAX_EXTENT:
                what = f"Tensor.input({params[0]!r})" if op == "input" else op
                raise sl.AlgorithmError(f"{what}: dimension {d} of the result would have {n} "
                                        f"elements, more than {T.MAX_EXTENT}, the largest extent "
                                        "of one dimension (loop variables are int32)")
        self.func, self.root = func, root
        self.input_node, self.array = None, None
        self._pipeline = None
        self._deferred = None

    @classmethod
    def deferred(cls, op, params, srcs, shape, dtype, name, build, root=True):
        """A stored op whose Funcs are built only when a pipeline needs them: its Func
        ``name`` is declared now (consumers read it), and ``build(func)`` defines it (and
        whatever it reads) the first time the graph is compiled. An eager ``.numpy()`` whose
        kernel is cached by structure then builds nothing. Example: the Winograd conv2d."""
        f = sl.Func(name, shape=shape).declare(dtype)
        t = cls.make(op, params, srcs, shape, dtype, lambda idx: f[tuple(idx)], func=f, root=root)
        t._deferred = build
        return t

    def _build_deferred(self):
        """Define the Funcs of every deferred op this Tensor depends on (sources first).
        One thread builds them; another that needs them meanwhile (``.numpy()`` of the same
        Tensor on two threads) waits until they are whole, instead of defining them again."""
        with _BUILD_LOCK:
            for n in topo_order(self):
                if n._deferred is not None:
                    n._deferred(n.func)
                    n._deferred = None

    @classmethod
    def make(cls, op, params, srcs, shape, dtype, index_fn, func=None, root=False):
        """Internal constructor for op results: ``op`` and hashable ``params`` plus the source
        Tensors form the structural key; ``index_fn(idx)`` gives the element expression."""
        t = cls.__new__(cls)
        t._init(op, params, srcs, shape, dtype, index_fn, func, root)
        if func is None and srcs:
            probe = t.element([sl.Var(f"i{d}") for d in range(len(shape))])
            if tree_size(probe) > MAX_INLINE_NODES:
                return cls.materialize("stored", (), [t], shape, t.element, root=True)
        return t

    @classmethod
    def input(cls, name, shape, dtype=sl.float32):
        """A named kernel input: ``x = Tensor.input("x", (1, 64, 56, 56))``.

        The Tensor reads ``sl.Input(name, dtype, shape)``; compile a result with
        ``sl.compile(y)`` and call the kernel with ``kern(x=array)``. Shapes are ints.
        """
        if not isinstance(name, str) or not name:
            raise sl.AlgorithmError(f"Tensor.input: the name must be a non-empty str (the "
                                    f"kernel's keyword argument), got {name!r}")
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise sl.AlgorithmError(f"Tensor.input({name!r}): shape must be a tuple of ints, got "
                                    f"{shape!r}")
        shape = tuple(shape)
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
                raise sl.AlgorithmError(f"Tensor.input({name!r}): shape must be a tuple of ints "
                                        f">= 0, got {shape!r}")
        try:
            dtype = T.as_dtype(dtype)
        except sl.AlgorithmError as e:
            raise sl.AlgorithmError(f"Tensor.input({name!r}): {e}") from None
        if name in _constant_names:
            raise sl.AlgorithmError(f"Tensor.input({name!r}): the frontend already gave this name "
                                    "to a constant Tensor(array); choose another name (_c "
                                    "followed by digits names the frontend's constants)")
        inp = sl.Input(name, dtype, shape)
        _user_names.add(name)
        fn = lambda idx: inp[tuple(idx)]  # noqa: E731
        t = cls.make("input", (name,), (), shape, dtype, fn)
        t.input_node = inp
        t.user_name = name
        return t

    @classmethod
    def materialize(cls, op, params, srcs, shape, body_fn, root=False):
        """A Tensor stored in its own Func: ``f[i0, i1, ...] = body_fn([i0, i1, ...])``.

        Reductions (``sl.sum`` etc. inside ``body_fn``) make the Func compute_root by the
        algorithm language's default; ``root=True`` asks for compute_root of a pure Func.
        """
        shape = tuple(int(s) for s in shape)
        ivars = [sl.Var(f"i{d}") for d in range(len(shape))]
        f = sl.Func(fresh_name(op), shape=shape)
        f[tuple(ivars)] = body_fn(ivars)
        return cls.make(op, params, srcs, shape, f.dtype, lambda idx: f[tuple(idx)], func=f,
                        root=root)

    # ------------------------------------------------------------------ basic properties
    @property
    def ndim(self) -> int:
        """Number of dimensions: ``Tensor(np.zeros((2, 3))).ndim == 2``."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements: ``Tensor(np.zeros((2, 3))).size == 6``."""
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d Tensor")
        return self.shape[0]

    def __repr__(self):
        return f"Tensor(op={self.op}, shape={self.shape}, dtype={self.dtype})"

    __hash__ = object.__hash__

    def __setitem__(self, key, value):
        # a Tensor is an expression, not storage: say how to build the changed value
        raise sl.AlgorithmError("Tensor: item assignment (t[...] = v) is not supported, a "
                                "Tensor is an immutable expression; build the new value "
                                "instead, e.g. F.where(mask, v, t), F.pad or F.concat")

    def __bool__(self):
        raise sl.AlgorithmError("a lazy Tensor has no Python truth value; call .numpy() first")

    @deep_recursion(sl.AlgorithmError, "building a Tensor's expression")
    def element(self, idx):
        """The algorithm expression of the element at ``idx`` (a list of int expressions).
        Each view or op is a call into its source's, so a long chain (``y.T`` 1000 times)
        is evaluated on a large stack rather than stopping at Python's recursion limit."""
        if len(idx) != self.ndim:
            raise sl.AlgorithmError(f"internal: {self.op} tensor of shape {self.shape} indexed "
                                    f"with {len(idx)} indices")
        return self.index_fn(list(idx))

    # ------------------------------------------------------------------ lowering
    def __schedlang_pipeline__(self):
        """``(output Func, default Schedule)`` for ``sl.compile(tensor)``."""
        if self._pipeline is None:
            self._build_deferred()
            inputs = [n.input_node for n in topo_order(self) if n.op == "input"]
            _check_input_names(inputs)
            out = self._output_func()
            # every Tensor.input of the graph is an argument, also one that only an empty
            # slice reads (its reads are gone from the algorithm)
            out.extra_inputs = inputs
            self._pipeline = (out, default_schedule(self, out))
        return self._pipeline

    def __schedlang_func__(self):
        """What ``s[tensor]`` schedules when the Tensor is part of a larger pipeline: the
        Input of a ``Tensor.input`` or constant, the Func of a stored op (a reduction,
        matmul, conv2d, ...); None for one computed inline in its consumers (elementwise
        math, views), which has no schedule of its own."""
        self._build_deferred()
        if self.func is None and self.stored_as is not None:
            # the op's own result read through a cast / reshape of the frontend (a float32
            # sum accumulated in float64): its stored Func is what the user means
            return self.stored_as.__schedlang_func__()
        return self.input_node if self.input_node is not None else self.func

    def pipeline(self):
        """``(output Func, Schedule)``: what ``sl.compile(tensor)`` compiles, to schedule by
        hand. The Schedule is a copy of the frontend's default one; ``sl.Schedule(tensor)``
        gives an unscheduled one instead. Either compiles with ``sl.compile(tensor, s)``.
        Example: ``f, s = y.pipeline(); print(s[f].loop_names()); sl.compile(y, s)``;
        ``s[y]`` is ``s[f]`` too."""
        out, default = self.__schedlang_pipeline__()
        return out, default.copy()

    def _output_func(self):
        if self.func is not None and self.func.shape is not None and \
                len(self.func.shape) == self.ndim:
            return self.func
        ivars = [sl.Var(f"i{d}") for d in range(self.ndim)]
        f = sl.Func(fresh_name("out"), shape=self.shape)
        f[tuple(ivars)] = self.element(ivars)
        return f

    def numpy(self):
        """Compute the Tensor and return a numpy array (eager path).

        Builds the output Func, picks its schedule as ``sl.compile(tensor)`` without one
        does (a tuned schedule from the tuning database, else with ``BEAM=N`` one tuned now,
        else the frontend's default schedule), compiles and runs it with the bound arrays.
        The kernel is reused for any later graph of the same structure, shapes and dtypes
        run on as many threads, as long as that choice cannot have changed: after a tuning
        run (``sl.autotune``, another process, a new ``BEAM``) the next call asks the
        database again. Example: ``(Tensor(a) @ Tensor(b)).softmax(-1).numpy()``.

        numpy has no bfloat16: a bfloat16 Tensor gives float32 values (exact, as torch's
        ``x.float().numpy()``), not the bit patterns that a compiled kernel returns.
        """
        key, leaves = graph_key(self)
        entry = self._eager_kernel((key, default_threads()), leaves)
        kern, names = entry.kernel, entry.names
        wanted = {i.name for i in kern.inputs}
        args = {}
        for name, leaf in zip(names, leaves):
            if name not in wanted:
                continue
            if leaf.array is None:
                raise sl.AlgorithmError(
                    f"Tensor.input {leaf.input_node.name!r} has no data, so .numpy() cannot run; "
                    f"compile instead: kern = sl.compile(t); kern({leaf.input_node.name}=array)")
            args[name] = leaf.array
        result = np.asarray(kern(**args)).reshape(self.shape)
        if self.dtype == sl.bfloat16:
            # the kernel returns the uint16 bits; a bfloat16 is the top half of a float32
            bits = result.astype(np.uint32)
            bits <<= 16             # in place: a 0-d result stays an array
            result = bits.view(np.float32)
        return result

    def _eager_kernel(self, cache_key, leaves):
        """The cached kernel entry of this graph, compiled (or re-chosen) when needed."""
        state = tuning_state()
        # the cache is shared by every thread: each look-up and update holds the lock (a
        # thread reordering it while another walks it raised "dictionary changed size
        # during iteration"); compiling does not, so threads compile different graphs at once
        with _CACHE_LOCK:
            entry = KERNEL_CACHE.get(cache_key)
            if entry is not None:
                _mark_recent(cache_key)
            if entry is not None and entry.state == state:
                CACHE_STATS["hits"] += 1
                return entry
        out, default = self.__schedlang_pipeline__()
        schedule, origin = choose_schedule([out], "llvm", default)
        if entry is not None and entry.origin == origin:
            # the tuning database changed, but not for this graph: the kernel is still right
            with _CACHE_LOCK:
                entry.state = state
                CACHE_STATS["hits"] += 1
            return entry
        kern = sl.compile(out, schedule if schedule is not None else default)
        entry = CachedKernel(kern, [leaf.input_node.name for leaf in leaves], origin, state)
        with _CACHE_LOCK:
            KERNEL_CACHE[cache_key] = entry
            _mark_recent(cache_key)
            while len(KERNEL_CACHE) > MAX_EAGER_KERNELS:
                KERNEL_CACHE.pop(next(iter(KERNEL_CACHE)))      # the least recently used
            CACHE_STATS["compiles"] += 1
        return entry

    def __array__(self, dtype=None, copy=None):
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def item(self):
        """The single value of a one-element Tensor as a Python number."""
        if self.size != 1:
            raise sl.AlgorithmError(f"item(): the Tensor has {self.size} elements (shape "
                                    f"{self.shape}); only a one-element Tensor has one value; "
                                    "use .numpy() for the array")
        return self.numpy().item()

    def __float__(self):
        """``float(t)`` of a one-element Tensor (it runs the graph), as numpy's."""
        return float(self.item())

    def __int__(self):
        """``int(t)`` of a one-element Tensor (it runs the graph), as numpy's."""
        return int(self.item())


# ---------------------------------------------------------------------- graph key / cache

KERNEL_CACHE: dict = {}          # in use order: the most recently used last
CACHE_STATS = {"compiles": 0, "hits": 0}
_CACHE_LOCK = threading.RLock()  # held by every access of KERNEL_CACHE and CACHE_STATS
_BUILD_LOCK = threading.RLock()  # held while deferred ops define their Funcs
MAX_EAGER_KERNELS = 256         # past this many graphs the least recently used is dropped
KEEP_OUTPUT_BUFFERS = 4         # kernels, the most recently used, that keep their output
                                # buffer for reuse (a large result is not zero-filled again)


def _mark_recent(cache_key):
    """Move a cache entry to the most recently used end. The kernel that falls out of the
    ``KEEP_OUTPUT_BUFFERS`` most recent gives back its output buffer, so that eager calls
    over many shapes do not hold one buffer per shape after the caller dropped them."""
    KERNEL_CACHE[cache_key] = KERNEL_CACHE.pop(cache_key)
    for n, key in enumerate(reversed(KERNEL_CACHE)):
        if n == KEEP_OUTPUT_BUFFERS:
            KERNEL_CACHE[key].kernel.release_output_buffers()
            break


class CachedKernel:
    """An eager kernel cache entry: the ``kernel``, the kernel argument ``names`` of the
    graph's leaves in ``graph_key`` order, the ``origin`` of its schedule and the
    ``tuning_state()`` under which that schedule was chosen (see ``Tensor.numpy``)."""

    __slots__ = ("kernel", "names", "origin", "state")

    def __init__(self, kernel, names, origin, state):
        self.kernel, self.names, self.origin, self.state = kernel, names, origin, state


def cache_info() -> dict:
    """Counters of the eager kernel cache: ``{"compiles": n, "hits": m, "size": k}``."""
    with _CACHE_LOCK:
        return dict(CACHE_STATS, size=len(KERNEL_CACHE))


def clear_cache():
    """Forget every cached eager kernel and reset the counters."""
    with _CACHE_LOCK:
        KERNEL_CACHE.clear()
        CACHE_STATS.update(compiles=0, hits=0)


def topo_order(t: Tensor) -> list:
    """Every Tensor ``t`` depends on, each once, sources before users."""
    order, seen, stack = [], set(), [(t, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        for s in reversed(n.srcs):
            if id(s) not in seen:
                stack.append((s, False))
    return order


def graph_key(t: Tensor):
    """``(key, leaves)``: a hashable structural key of the graph ending in ``t`` (ops,
    parameters, shapes, dtypes and sharing; not array values or generated names), and
    the input leaves in the key's order."""
    order = topo_order(t)
    index = {id(n): k for k, n in enumerate(order)}
    rows, leaves = [], []
    for n in order:
        if n.input_node is not None:
            leaves.append(n)
        rows.append((n.op, n.params, n.shape, n.dtype.name,
                     tuple(index[id(s)] for s in n.srcs)))
    return tuple(rows), leaves


# ---------------------------------------------------------------------- default schedule

# one AVX-512 register of float32 (16 lanes: half the instructions of 8 for math such as
# exp, and its vscalefps), or half of one for rows of 8 to 15
VECTOR_WIDTH = 16
# the elements one thread takes of a 1-D result (64 KiB of float32)
PARALLEL_CHUNK = 16384


def default_schedule(t: Tensor, out):
    """A schedule that is good without tuning: every stored Func (the output, reductions,
    Funcs marked root) runs its outermost loop in parallel and its innermost pure loop
    vectorized by 16, or 8 for short rows (tail handled by split's ``"auto"``); elementwise chains stay inline."""
    s = sl.Schedule(out)
    # a Func the output no longer reads (an empty slice of it reads nothing) is not part
    # of the pipeline
    present = {id(f) for f in s.funcs}
    stored = {id(out): out}
    for n in topo_order(t):
        if n.func is None or id(n.func) not in present:
            continue
        if n.root and n.func is not out:
            s[n.func].compute_root()
        if n.root or n.func.definitions[0].reductions:
            stored[id(n.func)] = n.func
    fast = {id(n.func): n.op for n in topo_order(t) if n.op in FAST_SCHEDULES
            and n.func is not None}
    done = set()               # Funcs a fast schedule has already taken care of
    # fast schedules first, consumers before producers: one may also place and order its
    # producers (a conv's weights, a stored layernorm's sums)
    order = list(stored.values())
    for f in order[:1] + order[:0:-1]:
        if id(f) not in present or id(f) in done or id(f) not in fast:
            continue
        module, fn = FAST_SCHEDULES[fast[id(f)]].split(":")
        mark = len(s.trace)
        try:
            scheduled = getattr(importlib.import_module(f".{module}", __package__), fn)(
                s, f, f is out)
        except sl.SchedlangError:
            scheduled = False     # not the form it expects: the generic schedule below
        if scheduled:
            done.update(id(g) for g in scheduled)
        elif len(s.trace) > mark:
            # undo what it did before it gave up (a copy per try costs a whole replay)
            s = s.copy(mark)
    for f in stored.values():
        if id(f) in present and id(f) not in done:
            loop_schedule(s, f)
    return s


# op of a stored Func -> "module:function" of its fast schedule in frontend/, each called
# as ``fn(schedule, func, is_output)`` and returning the Funcs it scheduled (or False)
FAST_SCHEDULES = {"matmul": "matmul_schedule:matmul_schedule",
                  "conv2d": "matmul_schedule:conv_schedule",
                  "conv2d_nhwc": "matmul_schedule:conv_nhwc_schedule",
                  "conv2d_pointwise": "matmul_schedule:pointwise_conv_schedule",
                  "conv2d_winograd": "winograd:winograd_schedule",
                  "softmax": "matmul_schedule:softmax_schedule",
                  "layernorm": "matmul_schedule:layernorm_schedule",
                  "sum": "reduction_schedule:reduction_schedule",
                  "max": "reduction_schedule:reduction_schedule",
                  "min": "reduction_schedule:reduction_schedule"}


TRANSPOSE_TILE = 16     # a tile of a transposing read: 16 x 16 floats, one line per row


def transposing_reads(value, inner):
    """The reads in expression ``value`` that index some array's rows, not its last
    (contiguous) dimension, with the Var named ``inner``: for each, the names of the Vars
    in its last index. ``x.T`` at ``[i, j]`` reads ``x[j, i]``: with ``inner="j"``, that
    gives ``[{"i"}]``."""
    found = []

    def visit(n):
        if isinstance(n, E.FuncRef) and n.args:
            last = E.expr_vars(n.args[-1])
            if inner not in last and any(inner in E.expr_vars(a) for a in n.args[:-1]):
                found.append(last)
    E.walk_expr(value, visit)
    return found


def _transposed_dim(f):
    """The dimension of ``f`` that some read of an Input or stored Func takes its last
    (contiguous) index from while ``f``'s own last dimension indexes it elsewhere: a
    transpose (``x.T + 1``, NCHW read as NHWC). None when every read follows ``f``."""
    args = [a.name for a in f.args]
    found = [a for last in transposing_reads(f.definitions[0].value, args[-1])
             for a in args[:-1] if a in last]
    return found[-1] if found else None


def loop_schedule(s, f):
    """Parallel outermost loop of extent > 1 / vectorized innermost pure loop of Func ``f``.
    A Func that reads something transposed runs in 16 x 16 tiles of the two dimensions
    involved, so that each cache line read is used whole, not once per output row."""
    shape = [int(x.value) for x in f.shape] if f.shape is not None else None
    args = list(f.args)
    if not args or shape is None:
        return
    stage = s[f]
    names = [a.name for a in args]
    other = _transposed_dim(f) if len(args) > 1 else None
    t = TRANSPOSE_TILE
    if other is not None and shape[-1] >= t and shape[names.index(other)] >= t:
        oo, oi = stage.split(other, t)
        io, ii = stage.split(names[-1], t)
        # tiles of the read's rows outermost: its 16 rows stream in order while each write
        # is one whole line of the output
        stage.reorder(io, oo, oi, ii).vectorize(ii)
        outer = next((d for d, n in enumerate(shape[:-1]) if n > 1), None)
        if worth_parallel(f):
            stage.parallel(io if names[outer] == other else args[outer])
        return
    dims, ext = list(args), list(shape)
    # trailing dims of extent 1 leave nothing to vectorize: fold them into the one before
    # (an (N, 1) result is one loop of N, contiguous)
    while len(dims) > 1 and ext[-1] == 1:
        dims[-2:] = [stage.fuse(dims[-2], dims[-1])]
        ext[-2:] = [ext[-2]]
    width = next((w for w in (VECTOR_WIDTH, VECTOR_WIDTH // 2) if ext[-1] >= w), None)
    outer = next((d for d, n in enumerate(ext[:-1]) if n > 1), None)
    if outer is None and width is not None and ext[-1] >= 2 * PARALLEL_CHUNK:
        # one long dimension (a 1-D result): chunks of it in parallel, each vectorized
        chunks, within = stage.split(dims[-1], PARALLEL_CHUNK)
        stage.vectorize(within, width).parallel(chunks)
        return
    if width is not None:
        stage.vectorize(dims[-1], width)
    if outer is not None and worth_parallel(f):
        stage.parallel(dims[outer])


def _check_input_names(inputs):
    """Two different ``Tensor.input``s of one graph may not share a name: each name is one
    keyword argument of the kernel."""
    seen = {}
    for inp in inputs:
        other = seen.setdefault(inp.name, inp)
        if other is not inp:
            raise sl.AlgorithmError(f"two different Tensor.input({inp.name!r}) meet in this graph; "
                                    "give each Tensor.input its own name (the names are the "
                                    "kernel's keyword arguments)")
