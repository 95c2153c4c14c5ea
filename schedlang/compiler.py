"""``sl.compile`` and ``sl.lower``: algorithm + schedule -> loop IR -> native kernel (SPEC §3).

Example::

    kern = sl.compile(C, s, target="llvm")
    out = kern(A=a, B=b)
    print(sl.lower(C, s))          # the loop nest, without compiling
"""
from __future__ import annotations

import os
import re
import sys
import time

from .algo import expr as E
from .algo.func import Func, Input, definition_exprs
from .deep_recursion import DEEP_PIPELINE_FUNCS, call_deep_if, deep_recursion
from .errors import AlgorithmError, CompileError, SchedlangError
from .lower import ir
from .lower.lower import lower_pipeline
from .schedule.schedule import Schedule
from .targets.kernel import Kernel

GPU_TARGETS = ("cuda", "hip", "metal")


def output_funcs(outputs, caller="sl.compile"):
    """``(output Funcs, their default Schedule or None)`` of what ``sl.compile`` takes: a
    Func, a list of Funcs, a frontend Tensor or a list of them (whose own default schedules
    are merged). Example: ``output_funcs([y, y.sum()])``."""
    default = None
    lowerable = getattr(outputs, "__schedlang_pipeline__", None)
    if lowerable is not None:
        outputs, default = lowerable()
    if isinstance(outputs, Func):
        outputs = [outputs]
    elif isinstance(outputs, (list, tuple)) and outputs:
        outputs = list(outputs)
    else:
        raise CompileError(f"{caller} takes an output Func (or a list of them, or a frontend "
                           f"Tensor), got {_describe(outputs)}")
    for n, o in enumerate(outputs):
        # a Func listed twice is found below, with the Funcs the Tensors stand for
        if not isinstance(o, Func) and any(o is p for p in outputs[:n]):
            first = next(m for m, p in enumerate(outputs) if p is o)
            raise CompileError(f"{caller}: the outputs at positions {first} and {n} are the same "
                               f"{type(o).__name__} (a view that changes nothing, such as .T "
                               "of a 1-D tensor, is the tensor itself); list it once")
    # several frontend Tensors: their output Funcs in one kernel, scheduled by each one's
    # own default schedule in turn
    pipelines = [o.__schedlang_pipeline__() if hasattr(o, "__schedlang_pipeline__") else None
                 for o in outputs]
    outputs = [p[0] if p is not None else o for p, o in zip(pipelines, outputs)]
    for o in outputs:
        if not isinstance(o, Func):
            raise CompileError(f"{caller} takes output Funcs (or frontend Tensors); "
                               f"the list holds {_describe(o)}")
    for n, o in enumerate(outputs):
        if any(o is p for p in outputs[:n]):
            raise CompileError(f"{caller}: the output {o.name} is listed twice; list each "
                               "output once (its result is one array)")
    if default is None and any(p is not None for p in pipelines):
        default = _merged_defaults(outputs, [p[1] for p in pipelines if p is not None])
    return outputs, default


def _outputs_and_schedule(outputs, schedule, target="llvm", tune=False, caller="sl.compile"):
    # frontend Tensors stand for Funcs of generated names: a message says what to do in
    # terms of the Tensors the caller holds
    given = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    tensors = any(hasattr(o, "__schedlang_pipeline__") for o in given)
    outputs, default = output_funcs(outputs, caller)
    if schedule is None and check_target(target) != "llvm":
        # the default (and a Tensor's) schedules are written for CPUs
        from .schedule.gpu_default import gpu_default_schedule
        schedule = gpu_default_schedule(outputs)
    if schedule is None:
        # a tuned schedule from the tuning database, or (BEAM=N, when compiling) a new
        # search; imported here because the autotuner itself builds on this module
        from .autotune.integration import choose_schedule
        schedule = choose_schedule(outputs, target, default, allow_tuning=tune)[0]
        if schedule is None:
            schedule = default if default is not None else Schedule(*outputs)
    if not isinstance(schedule, Schedule):
        raise CompileError(f"{caller}: schedule must be an sl.Schedule, got {schedule!r}")
    if len(schedule.outputs) != len(outputs) or any(a is not b for a, b in
                                                     zip(schedule.outputs, outputs)):
        theirs = ", ".join(o.name for o in schedule.outputs)
        ours = ", ".join(o.name for o in outputs)
        same = " (another Func of the same name: was the algorithm built again?)" \
            if theirs == ours else ""
        if sorted(map(id, schedule.outputs)) == sorted(map(id, outputs)):
            raise CompileError(f"{caller}: the schedule was built for the same outputs in another "
                               f"order ({theirs}, not {ours}); list the outputs in the order "
                               "the Schedule was built with (each output's array is returned "
                               "in that position)")
        if tensors:
            raise CompileError(f"{caller}: the schedule was built for other outputs (Funcs "
                               f"{theirs}) than the Tensor(s) compiled here (Func(s) {ours}); "
                               "build it from the same Tensor objects you compile: "
                               "s = sl.Schedule(y); sl.compile(y, s), or sl.Schedule(y1, y2) "
                               "for sl.compile([y1, y2], s)")
        raise CompileError(f"{caller}: the schedule is for {theirs}, not these outputs "
                           f"{ours}{same}; build it with sl.Schedule({ours}) of the Funcs you "
                           "compile, or move it over with Schedule.from_json(s.to_json(), ...)")
    built_for = ", ".join(o.name for o in schedule.outputs)
    for f, n in getattr(schedule, "defined_stages", {}).values():
        if len(f.definitions) != n:
            # the schedule holds the definitions it saw; compiling it would drop the rest
            raise CompileError(f"{caller}: {f.name} has {len(f.definitions)} definition(s) but "
                               f"had {n} when sl.Schedule({built_for}) was built; "
                               "the schedule does not cover the ones added since: build the "
                               "Schedule after the algorithm is complete")
    return outputs, schedule


def _describe(x):
    """What the user passed where outputs were expected, for an error message."""
    if isinstance(x, Input):
        return (f"the Input {x.name}; an Input is an argument of the kernel: compile the Func "
                "that reads it")
    if isinstance(x, (list, tuple)) and not x:
        return f"an empty {type(x).__name__}"
    return f"{x!r} ({type(x).__name__})"


def _merged_defaults(outputs, schedules):
    """One Schedule of ``outputs`` that replays each of ``schedules`` (defaults made for one
    output each), Func by Func: the directives of a Func an earlier default already
    scheduled (a shared intermediate) are left out, and so are those that no longer apply
    to what the earlier ones made. Returns None when the result does not lower; the
    caller then uses ``sl.Schedule``'s default."""
    if any(not isinstance(o, Func) for o in outputs):
        return None
    merged, taken = Schedule(*outputs), set()
    for s in schedules:
        groups = {}
        for d in s.trace:
            groups.setdefault(d.func, []).append(d)
        for name, directives in groups.items():
            if name in taken:
                continue
            trial = merged.copy()
            try:
                for d in directives:
                    trial.apply(d)
            except SchedlangError:
                continue
            merged = trial
            taken.add(name)
    try:
        lower_pipeline(merged, "llvm")
    except SchedlangError:
        return None
    return merged


def check_target(target):
    """The backend of ``target`` ("llvm"), or a CompileError saying which targets exist.
    Example: ``check_target("llvm:skylake-avx512") == "llvm"``."""
    if not isinstance(target, str) or not target:
        raise CompileError(f"target must be a string such as 'llvm', got {target!r}")
    base = target.split(":", 1)[0]
    if base == "llvm":
        if target != "llvm":
            # the CPU name too: sl.lower, bench and tune would otherwise go on with a
            # misspelled one that only code generation refuses
            from .targets.llvm_jit import _resolve_target
            _resolve_target(target)
        return "llvm"
    if base in GPU_TARGETS:
        from .targets.gpu_module import check_gpu_target
        check_gpu_target(target)
        return base
    raise CompileError(f"unknown target {target!r}; use 'llvm', 'llvm:<cpu>', 'cuda[:sm_XX]', "
                       "'hip[:gfxNNN]' or 'metal'")


def _check_cpu_directives(schedule):
    for f in schedule.funcs:
        for st in schedule.stage_schedules(f):
            for d in st.dims:
                if d.kind in ("gpu_block", "gpu_thread"):
                    which = "gpu_blocks" if d.kind == "gpu_block" else "gpu_threads"
                    which = f"{which}({d.name})"
                    for t in schedule.trace:    # bound by gpu_tile: name the call made
                        n = len(t.args) // 2
                        if t.op == "gpu_tile" and t.func == f.name and t.stage == st.index \
                                and d.name in [f"{v}.{p}" for v in t.args[:n] for p in "oi"]:
                            args = ", ".join(list(t.args[:n]) + [repr(x) for x in t.args[n:]])
                            which = f"gpu_tile({args}) (which binds {d.name})"
                    raise CompileError(f"{which} on {st.name} needs a GPU target "
                                       "(cuda, hip or metal); the llvm target runs on the CPU. "
                                       "Use parallel(...) for CPU threads")


def _refuse_unknown(where, unknown):
    """sl.compile and sl.lower take the same arguments; a misspelled one is named."""
    if unknown:
        raise CompileError(f"{where}: no argument named {sorted(unknown)[0]!r}; its arguments "
                           "are (outputs, schedule=None, target='llvm')")


@deep_recursion(CompileError, "sl.lower")
def lower(outputs, schedule=None, target="llvm", **unknown):
    """The loop IR of ``outputs`` under ``schedule`` (printable), without compiling it."""
    _refuse_unknown("sl.lower", unknown)
    # the target first: a bad one must not cost a tuning-database lookup
    base = check_target(target)
    outputs, schedule = _outputs_and_schedule(outputs, schedule, target, caller="sl.lower")
    if base == "llvm":
        _check_cpu_directives(schedule)
    stmt, _ = _deep_if_large(schedule, lower_pipeline, schedule, target)
    return stmt


def kernel_args(stmt, schedule):
    """Buffers (inputs, then outputs) and scalars (sizes and Params, by name) of a kernel."""
    args = [ir.KernelArg(b.name, "buffer", b.dtype) for b in schedule.inputs]
    args += [ir.KernelArg(o.name, "buffer", o.dtype) for o in schedule.outputs]
    scalars, kinds = {}, {}

    def fn(n):
        if isinstance(n, (E.SizeVar, E.Param)):
            kind = "Param" if isinstance(n, E.Param) else "size"
            if kinds.setdefault(n.name, (kind, n))[0] != kind:
                size = n if kind == "size" else kinds[n.name][1]
                of = f" of Input {size.source.name}" if getattr(size, "source", None) else ""
                # one kernel argument cannot be both: the size must come from the shape
                raise AlgorithmError(f"the Param {n.name!r} has the same name as the symbolic "
                                     f"size {n.name!r}{of}; rename the Param")
            if scalars.setdefault(n.name, n.dtype) != n.dtype:
                # one kernel argument cannot carry two types
                raise AlgorithmError(f"two Params are named {n.name!r}, one {scalars[n.name]} "
                                     f"and one {n.dtype}; give each Param its own name (or "
                                     "use one Param for both)")
    ir.walk_stmt(stmt, lambda s: [E.walk_expr(e, fn) for e in ir.stmt_exprs(s)])
    for b in list(schedule.inputs) + list(schedule.outputs):
        for x in b.shape or ():
            E.walk_expr(x, fn)
    for g in schedule.funcs:
        for d in schedule.definitions(g):
            for e in definition_exprs(d):
                E.walk_expr(e, fn)
    taken = {b.name: f"Input {b.name}" for b in schedule.inputs}
    taken.update({o.name: f"output Func {o.name}" for o in schedule.outputs})
    for name in sorted(scalars):
        if name in taken:
            # a kernel takes both by this name: an algorithm mistake, not a compiler one
            kind, n = kinds[name]
            of = f" of Input {n.source.name}" if getattr(n, "source", None) else ""
            what = f"the Param {name!r}" if kind == "Param" else f"the symbolic size {name!r}{of}"
            raise AlgorithmError(f"{what} has the same name as the {taken[name]}; a kernel "
                                 f"takes each by its name, so rename one of them")
        args.append(ir.KernelArg(name, "scalar", scalars[name]))
    return args


class BoundKernel(Kernel):
    """A Kernel with some arguments bound in advance: the data of a lowerable object's
    constants (``__schedlang_arguments__``, e.g. a frontend ``Tensor(array)``). Arguments
    given at call time take precedence."""

    bound: dict = {}

    def _bind(self, kwargs):
        return super()._bind({**self.bound, **kwargs})


@deep_recursion(CompileError, "sl.compile")
def compile(outputs, schedule=None, target="llvm", **unknown):  # noqa: A001 - SPEC name
    """Compile ``outputs`` (a Func, several, or a frontend Tensor) under ``schedule`` for
    ``target`` and return a callable Kernel. Example: ``sl.compile(C, s)(A=a, B=b)``."""
    _refuse_unknown("sl.compile", unknown)
    bound = {}
    for o in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
        bound_args = getattr(o, "__schedlang_arguments__", None)
        bound.update(bound_args() if bound_args is not None else {})
    # the target first: a bad one must not start a BEAM search
    base = check_target(target)
    outputs, schedule = _outputs_and_schedule(outputs, schedule, target, tune=True)
    if base == "llvm":
        _check_cpu_directives(schedule)
    return _deep_if_large(schedule, _build_kernel, outputs, schedule, target, base, bound)


def _deep_if_large(schedule, fn, *args):
    """``fn(*args)``, on the large stack at once when ``schedule``'s pipeline is big enough
    to nest past the default recursion limit (rather than failing there and starting over)."""
    return call_deep_if(len(schedule.funcs) > DEEP_PIPELINE_FUNCS, fn, *args)


def _build_kernel(outputs, schedule, target, base, bound):
    """Lower, generate and JIT: the steps that walk the whole statement recursively."""
    stmt, ctx = lower_pipeline(schedule, target)
    args = kernel_args(stmt, schedule)
    # the symbol name is ASCII whatever the Funcs are called (a Python name may be Unicode)
    name = "sl_" + re.sub(r"[^0-9A-Za-z_]", "_", "_".join(o.name for o in outputs))
    if base == "llvm":
        from .targets.llvm import compile_llvm
        t0 = time.perf_counter()
        module = compile_llvm(stmt, args, name, target)
        if os.environ.get("SCHEDLANG_DUMP") == "time":
            print(f"[schedlang] {'llvm codegen + jit':22s} {(time.perf_counter() - t0) * 1e3:8.2f} ms"
                  f"{' (from cache)' if module.from_cache else ''}", file=sys.stderr)
    else:
        from .targets.gpu_module import compile_gpu
        shapes = {b.name: b.shape for b in list(schedule.inputs) + list(schedule.outputs)}
        module = compile_gpu(stmt, args, name, target, shapes, [b.name for b in schedule.inputs])
    inputs = {i.name for i in schedule.inputs}
    bound = {k: v for k, v in bound.items() if k in inputs}
    if bound:
        kern = BoundKernel(outputs, schedule, stmt, ctx, module, args, target)
        kern.bound = bound
        return kern
    return Kernel(outputs, schedule, stmt, ctx, module, args, target)
