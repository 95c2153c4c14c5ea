"""Deep expressions: the compiler walks expression trees recursively, and Python's default
recursion limit (1000 frames, sized for its default 8 MiB stack) stops at an expression
a few hundred operations deep, e.g. 300 chained ``tanh``. An entry point decorated with
``deep_recursion`` runs as usual; only if it overflows the limit is it run again on a
helper thread with a large stack and a higher limit. If even that is not enough, the user
gets a ``SchedlangError`` that says what to do, never a bare ``RecursionError`` or a crash.

Example::

    @deep_recursion(CompileError, "compile")
    def compile(outputs, schedule=None, target="llvm"): ...
"""
from __future__ import annotations

import functools
import sys
import threading

DEEP_STACK_BYTES = 1 << 30    # address space only: pages are touched as deep as it goes
DEEP_LIMIT = 150_000          # frames; well inside DEEP_STACK_BYTES at ~2-4 KiB a frame
_local = threading.local()


def _on_deep_stack(fn, args, kwargs):
    out = {}

    def work():
        _local.deep = True
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as e:      # re-raised in the caller's thread
            out["error"] = e

    old_size = threading.stack_size()
    old_limit = sys.getrecursionlimit()
    threading.stack_size(DEEP_STACK_BYTES)
    sys.setrecursionlimit(max(old_limit, DEEP_LIMIT))
    try:
        t = threading.Thread(target=work, name="schedlang-deep", daemon=True)
        t.start()
    finally:
        threading.stack_size(old_size)
    try:
        while t.is_alive():
            t.join(0.1)             # a short wait keeps Ctrl-C responsive
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in out:
        raise out["error"]
    return out["value"]


# Funcs in a pipeline from which lowering starts on the large stack at once: the statement
# nests a level or more per stored Func, and a pipeline of ~80 (a 12-block MLP) overflowed
# the default limit only after seconds of work, which the retry then repeated
DEEP_PIPELINE_FUNCS = 48


def call_deep_if(deep, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, on the large stack when ``deep`` is true (a big pipeline)
    and this thread is not on it already. Example:
    ``call_deep_if(len(s.funcs) > DEEP_PIPELINE_FUNCS, lower_pipeline, s, target)``."""
    if not deep or getattr(_local, "deep", False):
        return fn(*args, **kwargs)
    return _on_deep_stack(fn, args, kwargs)


def deep_recursion(error, what):
    """Decorate an entry point that walks user expressions: on ``RecursionError`` it is run
    again on a large stack; one that still overflows raises ``error`` (a SchedlangError
    subclass) naming ``what`` was being done."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            # only the outermost decorated call retries: an inner one (a recursive entry
            # point) that caught the overflow would be too deep to even start the thread
            if getattr(_local, "deep", False) or getattr(_local, "active", False):
                return fn(*args, **kwargs)
            _local.active = True
            try:
                return fn(*args, **kwargs)
            except RecursionError:
                pass
            finally:
                _local.active = False
            try:
                return _on_deep_stack(fn, args, kwargs)
            except RecursionError:
                raise error(f"{what}: an expression is nested too deeply to compile (tens "
                            "of thousands of operations in one chain); split the chain into "
                            "several Funcs, each holding part of it, and compute them with "
                            "compute_root() or compute_at") from None
        return run
    return wrap
