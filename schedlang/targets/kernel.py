"""A compiled kernel as the user calls it: numpy arrays in, numpy array out (SPEC §3).

Every argument is checked before the native code runs: missing or extra names, dtypes,
ranks, sizes that disagree ("K is 64 from A but 32 from B"), violated ``assume`` facts,
and ``out=`` arrays it cannot write are ``ArgumentError``s, so generated code never
sees an array it could overrun. Example::

    kern = sl.compile(C, s)
    c = kern(A=a, B=b, alpha=2.0)
    stats = kern.time(A=a, B=b, alpha=2.0)   # median / min / runs
"""
from __future__ import annotations

import ctypes
import difflib
import math
import os
import sys
import time

import numpy as np

from ..algo import expr as E
from ..algo import types as T
from ..algo.evaluate import Unbound, evaluate
from ..algo.printer import user_text
from ..errors import ArgumentError, CompileError, OutOfMemoryError, SchedlangError
from ..lower.ir import ERROR_CODES
from .array_arguments import (_DELETER, BFloat16Bits, _DLManagedTensor,  # noqa: F401
                              as_array)


REUSE_BYTES = 1 << 20


class TimingStats:
    """Run times of a kernel in seconds: ``median``, ``min``, ``mean`` and ``runs``."""

    def __init__(self, times):
        self.times = sorted(times)
        self.runs = len(times)
        self.median = float(np.median(self.times))
        self.min = float(self.times[0])
        self.mean = float(np.mean(self.times))

    def __repr__(self):
        return (f"TimingStats(median={self.median * 1e3:.4f} ms, min={self.min * 1e3:.4f} ms, "
                f"runs={self.runs})")


MAX_THREADS = 1024      # the most threads a kernel runs on (``Kernel.num_threads``)


def default_threads():
    """Threads a parallel loop uses: ``SCHEDLANG_NUM_THREADS`` or every core, between 1 and
    ``MAX_THREADS`` (a larger value, or a machine of more cores, runs on that many: every
    kernel compiled under it was refused with a num_threads error)."""
    env = os.environ.get("SCHEDLANG_NUM_THREADS")
    if env:
        try:
            return min(MAX_THREADS, max(1, int(env)))
        except ValueError:
            pass
    return min(MAX_THREADS, os.cpu_count() or 1)


class Kernel:
    """A compiled pipeline. Call it with keyword arguments named after the Inputs and
    Params; it returns the output array (a tuple for several outputs)."""

    def __init__(self, outputs, schedule, stmt, ctx, module, args, target):
        self.outputs, self.schedule, self.target = outputs, schedule, target
        self.loop_ir_stmt, self.module, self.args = stmt, module, args
        self.inputs = list(schedule.inputs)
        self.params = sorted({a.name: a for a in args if a.kind == "scalar"
                              and a.name in _param_names(schedule)}.values(), key=lambda a: a.name)
        self.facts = list(ctx.user_facts)
        self.call_checks = list(ctx.call_checks)
        self.assert_messages = dict(ctx.assert_messages)
        self.num_threads = default_threads()
        self._spares = {}
        self._sizes_checked = set()
        self._plans = {}
        self._last_plan = None
        self._param_set = frozenset(p.name for p in self.params)

    @property
    def num_threads(self):
        """How many threads the kernel's ``parallel`` loops use (default: the CPU's cores;
        1 runs them serially). Example: ``kern.num_threads = 2``."""
        return self._num_threads

    @num_threads.setter
    def num_threads(self, n):
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise ArgumentError(f"num_threads must be an int (1 runs the parallel loops "
                                f"serially), got {n!r}")
        if not 1 <= n <= MAX_THREADS:
            raise ArgumentError(f"num_threads must be between 1 and {MAX_THREADS}, got {n}")
        self._num_threads = int(n)

    @property
    def source(self):
        """The generated code (optimized LLVM IR for the llvm target)."""
        return self.module.source

    @property
    def assembly(self):
        """The generated machine code as assembly text (llvm target)."""
        return self.module.assembly

    @property
    def loop_ir(self):
        """The lowered loop nest, printed as pseudocode."""
        return str(self.loop_ir_stmt)

    # ------------------------------------------------------------------ calling
    def _bind(self, kwargs):
        kwargs = dict(kwargs)
        out = kwargs.pop("out", None)
        names = {i.name for i in self.inputs} | {p.name for p in self.params}
        missing = sorted(names - set(kwargs))
        extra = sorted(set(kwargs) - names)
        # arguments bound in advance (a frontend Tensor's data) are not the caller's to give
        takes = ", ".join(sorted(self._argument_names())) or "no arguments"
        if missing or extra:
            parts = [f"missing argument(s): {', '.join(missing)}"] if missing else []
            if extra:
                # a misspelled name is both: say which given name may be meant
                guesses = [f"{x} (did you mean {m[0]}?)" if m else x for x in extra
                           for m in [difflib.get_close_matches(
                               x, missing or self._argument_names(), 1)]]
                parts.append(f"unexpected argument(s): {', '.join(guesses)}")
            raise ArgumentError(f"{'; '.join(parts)}; the kernel takes {takes}")
        sizes, where = {}, {}
        values = {}
        # in the order of the call, so a size conflict names the arrays in the user's order
        order = {name: n for n, name in enumerate(kwargs)}
        for inp in sorted(self.inputs, key=lambda i: order[i.name]):
            a = kwargs[inp.name]
            if not inp.shape and isinstance(a, (bool, int, float)) and \
                    not isinstance(a, np.generic):
                a = self._number_as_array(inp, a)    # kern(s=2.0) for a 0-d input, as numpy
            a = as_array(inp.name, a)
            values[inp.name] = self._check_array(inp, a, sizes, where, "input")
        for p in self.params:
            values[p.name] = self._check_param(p, kwargs[p.name])
            sizes[p.name] = values[p.name]
        outs = self._outputs(out, sizes, where)
        for n, (o, arr) in enumerate(zip(self.outputs, outs)):
            for other in outs[:n] if out is not None else ():
                if np.shares_memory(arr, other):
                    raise ArgumentError(f"out=: the arrays for {o.name} and another output overlap; "
                                        "give each output its own array")
        self._check_sizes(sizes)
        for a in self.args:
            if a.kind == "scalar" and a.name not in values:
                if a.name not in sizes:
                    raise ArgumentError(f"the size {a.name} cannot be inferred from the arguments; "
                                        "pass out= with the output array")
                values[a.name] = sizes[a.name]
        # copies last, once every argument passed its checks: a strided view of a huge
        # shape (a broadcast) is not expanded for a call that is refused anyway
        for inp in self.inputs:
            values[inp.name] = _contiguous(inp.name, values[inp.name])
        if out is None:
            outs = [self._fresh_output(n, shape, dtype) for n, (shape, dtype) in enumerate(outs)]
        for o, arr in zip(self.outputs, outs):
            values[o.name] = arr
            # the generated code assumes buffers do not overlap: copy an input that does
            for inp in self.inputs:
                if np.shares_memory(arr, values[inp.name]):
                    values[inp.name] = values[inp.name].copy()
        return values, outs

    def _argument_names(self):
        """Inputs then Params, each by name (the order other messages list them in), less
        those bound in advance (``bound``: the data of a frontend ``Tensor(array)``)."""
        bound = getattr(self, "bound", None) or {}
        return [n for n in sorted(i.name for i in self.inputs) + sorted(p.name for p in self.params)
                if n not in bound]

    def _check_sizes(self, sizes):
        """The ``assume`` facts and the size checks of the lowering, for these sizes and
        Param values; a set of sizes that passed once is not evaluated again."""
        # with each float's sign: 0.0 == -0.0, but 1 / alpha tells them apart
        key = tuple(sorted((k, v, _sign(v)) for k, v in sizes.items()))
        if key in self._sizes_checked:
            return
        for f in self.facts:
            try:
                ok = evaluate(f, sizes, exact=True)
            except Unbound:
                continue
            if not ok:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(sizes.items())
                                  if k in E.expr_vars(f))
                raise ArgumentError(f"the arguments violate assume({user_text(f)}) ({shown}): "
                                    "the kernel was compiled relying on it; pass arguments "
                                    "that satisfy it, or compile without that assume")
        for cond, why in self.call_checks:
            try:
                ok = evaluate(cond, sizes, exact=True)
            except Unbound:
                continue
            if not ok:
                if isinstance(cond, E.BinOp) and cond.op in ("eq", "ne", "lt", "le", "gt", "ge"):
                    got = _value_text(cond.a, sizes)
                else:
                    got = ", ".join(f"{k} = {v}" for k, v in sorted(sizes.items())
                                    if k in E.expr_vars(cond))
                raise ArgumentError(f"{why}; got {got}")
        if len(self._sizes_checked) >= 64:
            self._sizes_checked.clear()
        self._sizes_checked.add(key)

    def _check_array(self, buf, a, sizes, where, role):
        dt = buf.dtype
        label = f"{role} {buf.name}" if role else buf.name
        want = dt.numpy
        if dt.name == "bfloat16" and a.dtype.name == "bfloat16":
            a = a.view(np.uint16)
        if isinstance(a, BFloat16Bits) and dt.name != "bfloat16":
            raise ArgumentError(f"{label}: expected dtype {dt.name}, got bfloat16; convert it "
                                f"to {want.name} first (torch: .to(torch.{want.name}))")
        if a.dtype != want:
            raise ArgumentError(f"{label}: expected dtype {dt.name}"
                                + (" (as uint16 bits)" if dt.name == "bfloat16" else "")
                                + f", got {a.dtype}; " + (
                                    "pass a bfloat16 tensor (e.g. torch's), or the bits as "
                                    "uint16: from float32 values f, "
                                    "(f.view(np.uint32) >> 16).astype(np.uint16) truncates "
                                    "them to bfloat16"
                                    if dt.name == "bfloat16" else
                                    f"convert it with .astype(np.{want.name}) (a torch "
                                    f"tensor: .to(torch.{want.name}))"))
        if a.ndim != len(buf.shape):
            raise ArgumentError(f"{label}: expected {len(buf.shape)} dimensions, got "
                                f"{a.ndim} (shape {a.shape})")
        for d, (ext, n) in enumerate(zip(buf.shape, a.shape)):
            if n > T.MAX_EXTENT:
                raise ArgumentError(f"{label}: dimension {d} has {n} elements, more than "
                                    f"{T.MAX_EXTENT}, the largest extent of one dimension (loop "
                                    "variables are int32); split the array into parts")
            if isinstance(ext, E.SizeVar):
                if ext.name in sizes and sizes[ext.name] != n:
                    raise ArgumentError(f"{ext.name} is {sizes[ext.name]} from {where[ext.name]} "
                                        f"but {n} from {buf.name} (dimension {d})")
                sizes[ext.name] = int(n)
                # the first array that gave the size is the one a conflict names
                where.setdefault(ext.name, f"{buf.name} (dimension {d})")
        for d, (ext, n) in enumerate(zip(buf.shape, a.shape)):
            try:
                want_n = evaluate(ext, sizes, exact=True)
            except Unbound:
                continue
            if want_n != n:
                # a constant extent reads "should be 2", a symbolic one "should be M - 2 = 30"
                expected = str(want_n) if isinstance(ext, E.Const) else f"{ext} = {want_n}"
                raise ArgumentError(f"{label}: dimension {d} should be {expected}, "
                                    f"got {n} (shape {tuple(a.shape)}); pass an array of shape "
                                    f"{self._expected_shape(buf, sizes)}")
        return a

    @staticmethod
    def _expected_shape(buf, sizes):
        """``buf``'s shape with the sizes bound so far, a symbol where one is still unbound."""
        dims = []
        for ext in buf.shape:
            try:
                dims.append(str(evaluate(ext, sizes, exact=True)))
            except Unbound:
                dims.append(str(ext))
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def _check_param(self, p, v, label=None):
        """The value of Param ``p`` (``label`` names it in messages) from ``v``."""
        dt = p.dtype
        label = label or f"Param {p.name}"
        if not isinstance(v, np.ndarray) and hasattr(v, "__dlpack__") and \
                getattr(v, "shape", None) == ():
            v = as_array(label, v)      # a 0-d torch tensor, like a 0-d array
            if isinstance(v, BFloat16Bits):
                # numpy has no bfloat16: the value is the high half of a float32's bits
                v = (v.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v.item()
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, np.floating):      # np.longdouble: item() keeps it
            with np.errstate(over="ignore"):
                f = float(v)
            if math.isinf(f) and np.isfinite(v):
                raise ArgumentError(f"{label}: {v!r} is beyond the range of {dt.name}; "
                                    "pass a smaller value")
            v = f
        if dt.is_bool:
            if not isinstance(v, (bool, int)) or v not in (0, 1):
                raise ArgumentError(f"{label}: expected a bool (True / False, or 1 / 0), "
                                    f"got {v!r}")
            return bool(v)
        if dt.is_int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ArgumentError(f"{label}: expected an integer ({dt.name}), got {v!r}")
            if not dt.min_value() <= v <= dt.max_value():
                raise ArgumentError(f"{label}: {v} does not fit {dt.name}")
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ArgumentError(f"{label}: expected a number ({dt.name}), got {v!r}")
        try:
            with np.errstate(over="ignore"):
                rounded = T.round_to_float(v, dt)
        except OverflowError:       # an int past every float
            rounded = float("inf")
        if rounded in (float("inf"), -float("inf")) and v not in (float("inf"), -float("inf")):
            shown = repr(v) if len(repr(v)) < 30 else f"an int of {len(str(abs(v)))} digits"
            raise ArgumentError(f"{label}: {shown} is beyond the range of {dt.name} (it "
                                "would be infinite); pass a smaller value, or inf itself")
        return rounded

    def _number_as_array(self, inp, v):
        """A Python number given for the 0-d Input ``inp`` as a 0-d array of its dtype: like a
        weak literal, it takes the input's type if its value fits (a float for an integer
        input, or one out of range, is an ArgumentError naming the input)."""
        v = self._check_param(inp, v, label=f"input {inp.name}")
        if inp.dtype.name == "bfloat16":
            bits = np.asarray(v, np.float32).view(np.uint32) >> 16      # exact: v is rounded
            return bits.astype(np.uint16)
        return np.asarray(v, inp.dtype.numpy)

    def _check_out_count(self, out):
        names = ", ".join(o.name for o in self.outputs)
        if len(self.outputs) == 1:
            if len(out) != 1:
                raise ArgumentError(f"out=: this kernel has one output ({names}); pass its "
                                    f"array (a {type(out).__name__} is read as one array per "
                                    "output: wrap it in np.asarray(...) if it is the data)")
            return
        if not isinstance(out, (tuple, list)):
            raise ArgumentError(f"out=: this kernel has {len(self.outputs)} outputs ({names}); "
                                f"pass a tuple or list of their arrays in that order, not a "
                                f"{type(out).__name__}")
        if len(out) != len(self.outputs):
            raise ArgumentError(f"out=: this kernel has {len(self.outputs)} outputs ({names}) "
                                f"and out= holds {len(out)}; pass one array per output, in "
                                "that order")

    def _outputs(self, out, sizes, where):
        if out is not None and len(self.outputs) == 1 and not isinstance(out, (tuple, list)):
            out = (out,)
        if out is not None:
            self._check_out_count(out)
        arrays = []
        for n, o in enumerate(self.outputs):
            if out is not None:
                # one output: "out=" says which (its Func may have a generated name)
                label = "out=" if len(self.outputs) == 1 else f"out= for output {o.name}"
                a = as_array(label, out[n], written=True)
                a = self._check_array(_OutBuf(o, label), a, sizes, where, "")
                if not a.flags.c_contiguous or not a.flags.writeable:
                    raise ArgumentError(f"{label}: the array must be C-contiguous and writeable; "
                                        "pass np.empty(...) or use the returned array")
                arrays.append(a)
                continue
            shape = []
            for d, ext in enumerate(o.shape):
                try:
                    n_ = int(evaluate(ext, sizes, exact=True))
                except Unbound as u:
                    raise ArgumentError(f"the size {u} of output {o.name} cannot be inferred from the "
                                        "inputs; pass out= with the output array") from None
                if n_ < 0 or n_ > T.MAX_EXTENT:
                    raise ArgumentError(f"output {o.name}: dimension {d} would be {ext} = {n_} "
                                        + ("< 0" if n_ < 0 else f"> {T.MAX_EXTENT}, the largest "
                                           "extent of one dimension (loop variables are int32)")
                                        + " for these inputs")
                shape.append(n_)
            arrays.append((shape, o.dtype.numpy))   # allocated by _bind, checks done
        return arrays

    def release_output_buffers(self):
        """Let go of the large output arrays this kernel keeps for reuse by its next call
        (the memory is freed once the caller holds none of them either). Example:
        ``kern.release_output_buffers()`` after the last call of a kernel kept around."""
        self._spares.clear()

    def _fresh_output(self, n, shape, dtype):
        """A new output array; a large one reuses the array this kernel returned last time
        when nothing outside the kernel holds it any more (a new array from the system
        would be zero-filled page by page first, which costs as much as writing it)."""
        shape = tuple(shape)
        spare = self._spares.get(n)
        # the only references left: the dict, this local name and getrefcount's argument
        # and still as the kernel made it (a caller may have made it read-only, or set its
        # dtype, strides or shape in place, before letting it go)
        if (spare is not None and sys.getrefcount(spare) <= 3 and spare.shape == shape
                and spare.dtype == dtype and spare.base is None and spare.flags.writeable
                and spare.flags.c_contiguous):
            return spare
        try:
            arr = np.empty(shape, dtype=dtype)
        except (ValueError, MemoryError):
            raise OutOfMemoryError(
                f"output {self.outputs[n].name}: its shape {tuple(shape)} of {np.dtype(dtype)} "
                f"needs {_byte_text(shape, dtype)}, more than can be allocated; pass smaller "
                "inputs") from None
        if arr.nbytes >= REUSE_BYTES:
            self._spares[n] = arr
        return arr

    def _run(self, values):
        argv = _llvm_jit().pack_args(self.args, values)
        self._run_argv((ctypes.c_uint64 * len(argv)).from_buffer(argv))

    def _run_argv(self, argv):
        """Run the kernel on a ctypes uint64 array of its arguments; raise on its status."""
        cannot_run = getattr(self.module, "cannot_run", None)
        if cannot_run:
            raise CompileError(cannot_run)
        rc = self.module.call(argv, self.num_threads)
        if rc:
            self._raise_status(rc)

    def _raise_status(self, rc):
        if rc in self.assert_messages:
            raise ArgumentError(self.assert_messages[rc])
        if rc == 2:
            raise OutOfMemoryError(
                "the kernel could not allocate the storage of an intermediate Func: these "
                "sizes need more memory than there is (or more bytes than 64 bits count); "
                "pass smaller inputs, or compute the large Func in pieces (compute_at inside "
                "a loop of its consumer) so that it needs less storage")
        raise SchedlangError(f"the kernel stopped: {ERROR_CODES.get(rc, f'error {rc}')}")

    def __call__(self, /, *positional, **kwargs):
        # self is positional-only, so an Input or Param may be named "self"
        if positional:
            names = self._argument_names()
            takes = (f"keyword arguments only ({', '.join(f'{n}=...' for n in names)})"
                     if names else "no arguments")
            raise ArgumentError(f"the kernel takes {takes}; got {len(positional)} positional "
                                "argument(s)")
        # the arguments of the last call again (new arrays of the same kinds): the fewest
        # steps, since each touches memory that is cold when the kernel runs after other
        # work (26 -> 12 us for a tiny kernel called after a cache flush)
        plan = self._last_plan
        if plan is not None and plan.matches(kwargs):
            outs = plan.run(self, kwargs)
            if outs is not None:
                return outs[0] if len(outs) == 1 else tuple(outs)
        key = self._call_key(kwargs)
        plan = self._plans.get(key) if key is not None else None
        if plan is not None:
            outs = plan.run(self, kwargs)
            if outs is not None:
                self._last_plan = plan
                return outs[0] if len(outs) == 1 else tuple(outs)
        values, outs = self._bind(kwargs)
        empty = self._all_empty(outs)
        if not empty:
            self._run(values)
        if key is not None and not empty:
            self._remember_plan(key, kwargs, values, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _all_empty(self, outs):
        """True when every output is empty (the kernel has nothing to do and is not run).
        Some but not all empty is refused: the code was compiled knowing that each output
        size is at least 1 when it runs."""
        empty = [o.name for o, a in zip(self.outputs, outs) if a.size == 0]
        if empty and len(empty) != len(outs):
            raise ArgumentError(f"output(s) {', '.join(empty)} would be empty while others are not; "
                                "a kernel of several outputs runs only when each has an "
                                "element or all are empty; compile the outputs as separate "
                                "kernels to compute them with these sizes")
        return bool(empty)

    # A call whose arrays have the shapes, strides and dtypes (and Params the values) of an
    # earlier call that passed every check needs none of the checks again: its plan only
    # puts the new arrays' addresses into the argument array. This keeps a call of a small
    # kernel at a few microseconds of Python (and few cache misses when the caches are cold).
    def _call_key(self, kwargs):
        key = []
        for k, v in kwargs.items():
            t = type(v)
            if t is np.ndarray:
                if k in self._param_set:
                    return None
                key.append((k, v.shape, v.strides, v.dtype, k != "out" or v.flags.writeable))
            elif t in _SCALAR_TYPES:
                key.append((k, t, v, _sign(v)))
            else:
                return None
        return tuple(key)

    def _remember_plan(self, key, kwargs, values, outs):
        plan = _CallPlan.make(self, key, kwargs, values, outs)
        if plan is None:
            return
        if len(self._plans) >= 16:
            self._plans.clear()
        self._plans[key] = self._last_plan = plan

    def time(self, /, *args, **kwargs):
        """Time the kernel called with ``kwargs``: ``warmup=1`` untimed runs, then repeats
        until ``budget_s=0.5`` seconds (at least 3 runs, or exactly ``repeats=``). A kernel
        argument of one of those names is the argument, not the option. Returns TimingStats.
        Example: ``kern.time(A=a, B=b, budget_s=1.0).median``."""
        if args or any(not isinstance(k, str) for k in kwargs):
            given = ", ".join(f"{n}=..." for n in self._argument_names())
            raise ArgumentError(f"time() takes keyword arguments only: kern.time({given})"
                                if given else
                                "time() takes no kernel arguments, only the timing options "
                                "warmup=, repeats= and budget_s=")
        names = set(self._argument_names())
        timing = ("warmup", "repeats", "budget_s")
        options = {k: kwargs.pop(k) for k in timing if k in kwargs and k not in names}
        for k in kwargs:
            guess = difflib.get_close_matches(k, [o for o in timing if o not in names], 1)
            if k not in names and guess and not difflib.get_close_matches(k, names, 1):
                raise ArgumentError(f"time(): unexpected argument {k} (did you mean the timing "
                                    f"option {guess[0]}=?); the kernel takes "
                                    f"{', '.join(self._argument_names()) or 'no arguments'}")
        return self.time_arguments(kwargs, **options)

    def time_arguments(self, arguments, warmup=1, repeats=None, budget_s=0.5):
        """``time`` with the kernel's arguments as a dict, kept apart from the options (the
        autotuner's form: any argument names). Example:
        ``kern.time_arguments({"A": a}, warmup=0, repeats=1)``."""
        _check_timing_options(warmup, repeats, budget_s)
        values, outs = self._bind(arguments)
        device_call = getattr(self.module, "device_call", None)
        if device_call is not None and not self._all_empty(outs):
            call = device_call(_llvm_jit().pack_args(self.args, values))
            if call is not None:
                try:
                    return self._time_on_device(call, warmup, repeats, budget_s)
                finally:
                    call.release()
        run = (lambda: None) if self._all_empty(outs) else (lambda: self._run(values))
        for _ in range(max(0, warmup)):
            run()

        def measure():
            t0 = time.perf_counter()
            run()
            return time.perf_counter() - t0
        return _repeat_timing(measure, repeats, budget_s)

    def _time_on_device(self, call, warmup, repeats, budget_s):
        """GPU kernels timed by device events, their arguments copied to the device once
        (as torch and Triton's do_bench time them: the copies are not the kernel's time)."""
        for _ in range(max(0, warmup)):
            rc = call.run()
            if rc:
                self._raise_status(rc)

        def measure():
            seconds, rc = call.run_timed()
            if rc:
                self._raise_status(rc)
            return seconds
        return _repeat_timing(measure, repeats, budget_s)

    def __repr__(self):
        return f"<Kernel {', '.join(o.name for o in self.outputs)} target={self.target}>"


def _repeat_timing(measure, repeats, budget_s):
    """TimingStats of ``measure()`` (seconds of one run): exactly ``repeats`` runs, or at
    least 3 and until ``budget_s`` seconds have passed."""
    times = []
    t_end = time.perf_counter() + budget_s
    while True:
        times.append(measure())
        if repeats is not None:
            if len(times) >= repeats:
                break
        elif len(times) >= 3 and time.perf_counter() > t_end:
            break
    return TimingStats(times)


def _byte_text(shape, dtype):
    n = math.prod(int(x) for x in shape) * np.dtype(dtype).itemsize
    return f"{n} bytes" if n < 1 << 30 else f"{n} bytes (about 2**{n.bit_length() - 1})"


def _contiguous(name, a):
    """``a`` as a C-contiguous array; a strided one is copied, and a copy too large to
    allocate (a zero-stride broadcast of a huge shape) is an error naming the input."""
    try:
        return np.ascontiguousarray(a)
    except (ValueError, MemoryError):
        raise OutOfMemoryError(
            f"input {name}: the array is not contiguous and its contiguous copy (shape "
            f"{a.shape}, {_byte_text(a.shape, a.dtype)}) cannot be allocated; pass a "
            "C-contiguous array (a broadcast view expands to its full size)") from None


def _check_timing_options(warmup, repeats, budget_s):
    """``time``'s options: counts are ints (warmup >= 0, repeats >= 1), the budget a finite
    number of seconds >= 0 (a NaN budget would never end the loop)."""
    def count(x):
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
    if not count(warmup) or warmup < 0:
        raise ArgumentError(f"time(warmup={warmup!r}): give the number of untimed runs, an "
                            "int >= 0")
    if repeats is not None and (not count(repeats) or repeats < 1):
        raise ArgumentError(f"time(repeats={repeats!r}): give the number of timed runs, an "
                            "int >= 1 (or leave it out to run until budget_s)")
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float, np.integer,
                                                              np.floating)) \
            or not 0 <= budget_s < math.inf:
        raise ArgumentError(f"time(budget_s={budget_s!r}): give a finite number of seconds "
                            ">= 0")


def _llvm_jit():
    """The LLVM runtime module (imported on first use: the kernel layer serves every target,
    and a function-level import costs microseconds per call)."""
    global _LLVM_JIT
    if _LLVM_JIT is None:
        from . import llvm_jit
        _LLVM_JIT = llvm_jit
    return _LLVM_JIT


_LLVM_JIT = None
_MISSING = object()


def _sign(v):
    """The sign of a float Param's value, which ``==`` ignores (0.0 == -0.0, and 1 / x
    tells them apart); None for the other types."""
    return math.copysign(1.0, v) if type(v) in _FLOAT_TYPES else None

_FLOAT_TYPES = frozenset([float, np.float16, np.float32, np.float64])
_SCALAR_TYPES = frozenset([int, float, bool, np.float16, np.float32, np.float64, np.int8,
                           np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                           np.uint64, np.bool_])


class _CallPlan:
    """The arguments of a checked call, ready to repeat with new arrays of the same kind:
    the packed argument array (sizes and Params filled in), the slots of the input and
    output buffers, and the outputs' shapes (None when the caller passes ``out=``)."""

    __slots__ = ("template", "argv_type", "inputs", "outputs", "out_shapes", "key", "entry",
                 "data_address")

    @classmethod
    def make(cls, kern, key, kwargs, values, outs):
        """A plan for calls like this one (``key``: ``Kernel._call_key``), or None when it
        needs the general path (an input was copied: not contiguous, overlapping an output,
        bfloat16 given as such)."""
        out_names = [o.name for o in kern.outputs]
        plan = cls()
        plan.key, plan.entry = key, kern.module.entry
        plan.data_address = _llvm_jit().data_address
        plan.inputs, plan.outputs = [], []
        packed = _llvm_jit().pack_args(kern.args, values)
        for slot, a in enumerate(kern.args):
            if a.kind != "buffer":
                continue
            if a.name in out_names:
                plan.outputs.append((slot, out_names.index(a.name)))
            elif values.get(a.name) is kwargs.get(a.name) and a.name in kwargs:
                plan.inputs.append((slot, a.name))
            else:
                return None
            packed[slot] = 0
        plan.argv_type = ctypes.c_uint64 * len(packed)
        plan.template = packed.tobytes()
        plan.out_shapes = None if "out" in kwargs else [
            (n, arr.shape, arr.dtype) for n, arr in enumerate(outs)]
        return plan

    def matches(self, kwargs):
        """Whether ``kwargs`` has the arrays' shapes, strides and dtypes and the Params'
        values this plan was made for (what ``Kernel._call_key`` compares, without
        building the key)."""
        if len(kwargs) != len(self.key):
            return False
        for entry in self.key:
            v = kwargs.get(entry[0], _MISSING)
            if len(entry) == 4:
                if type(v) is not entry[1] or v != entry[2] or _sign(v) != entry[3]:
                    return False
            elif (type(v) is not np.ndarray or v.shape != entry[1] or v.strides != entry[2]
                  or (v.dtype is not entry[3] and v.dtype != entry[3])
                  or (entry[0] == "out" and not v.flags.writeable)):
                return False
        return True

    def run(self, kern, kwargs):
        """Run with the arrays of ``kwargs``; returns the outputs, or None when this call
        needs the general path (an ``out=`` array that overlaps an input)."""
        data_address = self.data_address
        argv = self.argv_type.from_buffer_copy(self.template)
        for slot, name in self.inputs:
            argv[slot] = data_address(kwargs[name])
        if self.out_shapes is None:
            outs = [kwargs["out"]]
            # the plan's inputs are contiguous and so is out: their byte ranges tell
            start = data_address(outs[0])
            end = start + outs[0].nbytes
            for slot, name in self.inputs:
                if argv[slot] < end and start < argv[slot] + kwargs[name].nbytes:
                    return None
        else:
            outs = [kern._fresh_output(n, shape, dtype) for n, shape, dtype in self.out_shapes]
        for slot, n in self.outputs:
            argv[slot] = data_address(outs[n])
        rc = self.entry(argv, kern._num_threads)
        if rc:
            kern._raise_status(rc)
        return outs


class _OutBuf:
    """An output Func as the array checks see it, under the name messages give it."""

    def __init__(self, f, name):
        self.name, self.dtype, self.shape = name, f.dtype, f.shape


def _param_names(schedule):
    from ..algo.func import definition_exprs
    names = set()
    for g in schedule.funcs:
        for d in schedule.definitions(g):
            for e in definition_exprs(d):
                E.walk_expr(e, lambda n: names.add(n.name) if isinstance(n, E.Param) else None)
    for e in schedule.assumptions:
        E.walk_expr(e, lambda n: names.add(n.name) if isinstance(n, E.Param) else None)
    return names


__all__ = ["Kernel", "TimingStats", "default_threads"]


def _value_text(e, sizes):
    """``e`` and its value for these sizes, for a message: ``M - 2 = 15``."""
    from ..algo.printer import expr_to_str
    try:
        return f"{expr_to_str(e)} = {evaluate(e, sizes, exact=True)}"
    except Unbound:
        return expr_to_str(e)
