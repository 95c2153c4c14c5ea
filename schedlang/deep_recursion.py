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

# The recursion limit and the stack size of new threads are process-wide. Threads that run
# deep work at once share one raise of the limit: the first saves the user's limit, the last
# to finish puts it back (one thread putting back 1000 while another was still 50,000 frames
# deep, or keeping 150,000 for good after a second one saved the raised value, let a thread
# on an ordinary 8 MiB stack recurse until the process died with SIGSEGV). The stack size is
# set and put back under the lock, so each helper surely gets the large stack.
_DEEP_LOCK = threading.Lock()
_deep_threads = 0
_saved_limit = None


def _on_deep_stack(fn, args, kwargs):
    global _deep_threads, _saved_limit
    out = {}

    def work():
        global _deep_threads
        _local.deep = True
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as e:      # re-raised in the caller's thread
            out["error"] = e
        finally:
            with _DEEP_LOCK:
                _deep_threads -= 1
                if _deep_threads == 0:
                    sys.setrecursionlimit(_saved_limit)

    with _DEEP_LOCK:
        if _deep_threads == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, DEEP_LIMIT))
        _deep_threads += 1
        old_size = threading.stack_size()
        threading.stack_size(DEEP_STACK_BYTES)
        try:
            t = threading.Thread(target=work, name="schedlang-deep", daemon=True)
            t.start()
        except BaseException:
            _deep_threads -= 1
            if _deep_threads == 0:
                sys.setrecursionlimit(_saved_limit)
            raise
        finally:
            threading.stack_size(old_size)
    while t.is_alive():
        t.join(0.1)             # a short wait keeps Ctrl-C responsive
    if "error" in out:
        raise out["error"]
    return out["value"]


def _limit_raised():
    """True while another thread's deep work has raised the process's recursion limit: a
    call on an ordinary stack would then recurse past what its stack holds."""
    return _deep_threads > 0


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
            # while another thread's deep work has raised the limit, no RecursionError
            # would stop this call before it overflowed this thread's stack: it runs on a
            # large one at once
            if not _limit_raised():
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
