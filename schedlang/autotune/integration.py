"""What ``sl.compile(f)`` without a schedule asks the autotuner (SPEC §3, §4).

A tuned schedule stored in the database for this workload and target is used; else, when
the environment sets ``BEAM=N``, the pipeline is tuned now with beam width N (budget:
``SCHEDLANG_BEAM_BUDGET_S`` seconds, default 55, which leaves the program that called
``sl.compile`` a few seconds of a minute) and the result stored, so the next run
loads it without searching; else the caller falls back to the default schedule. The check
costs nothing when there is no database file and no ``BEAM``.
Example::

    s = tuned_schedule([C], "llvm")      # a Schedule, or None: use the default
"""
from __future__ import annotations

import os
import warnings

from ..errors import SchedlangError
from .database import TuningDatabase

DEFAULT_BEAM_BUDGET_S = 55.0


def beam_from_env():
    """The beam width ``BEAM`` asks for (0 when unset, empty or 0); a value that is not a
    non-negative int is ignored with a warning. Example: ``beam_from_env()  # 4 under BEAM=4``."""
    text = os.environ.get("BEAM", "").strip()
    if not text:
        return 0
    try:
        n = int(text)
        if n < 0:
            raise ValueError
        return n
    except ValueError:
        warnings.warn(f"schedlang: BEAM={text!r} is not a beam width (an int >= 0); ignoring it",
                      stacklevel=4)
        return 0


def budget_from_env():
    """Seconds a BEAM search may take: ``SCHEDLANG_BEAM_BUDGET_S`` or 55.
    Example: ``budget_from_env()``."""
    text = os.environ.get("SCHEDLANG_BEAM_BUDGET_S", "").strip()
    try:
        value = float(text) if text else DEFAULT_BEAM_BUDGET_S
        return value if value > 0 else DEFAULT_BEAM_BUDGET_S
    except ValueError:
        warnings.warn(f"schedlang: SCHEDLANG_BEAM_BUDGET_S={text!r} is not a number of seconds; "
                      f"using {DEFAULT_BEAM_BUDGET_S:g}", stacklevel=4)
        return DEFAULT_BEAM_BUDGET_S


def tuned_schedule(outputs, target="llvm", default=None, allow_tuning=True):
    """The schedule ``sl.compile(outputs)`` should use when none is given: the database's
    tuned one for this workload and target, else (with ``BEAM=N`` and ``allow_tuning``) a
    freshly tuned one seeded with ``default``, else None. Example:
    ``tuned_schedule([C], "llvm") or sl.Schedule(C)``."""
    beam = beam_from_env()
    db = TuningDatabase()
    if not beam and not os.path.exists(db.path):
        return None
    from .keys import workload_key
    try:
        key = workload_key(outputs, target)
    except SchedlangError as e:
        if beam and allow_tuning:
            warnings.warn(f"schedlang: BEAM is set but {', '.join(o.name for o in outputs)} "
                          f"cannot be tuned ({e}); compiling with the default schedule",
                          stacklevel=4)
        return None
    found = db.load_schedule(key, outputs, min_beam=beam)
    if found is not None or not beam or not allow_tuning:
        return found
    if target.split(":", 1)[0] != "llvm":
        return None
    from .search import tune
    seeds = [default] if default is not None else []
    return tune(outputs, target, beam=beam, budget_s=budget_from_env(), seeds=seeds).schedule


__all__ = ["tuned_schedule", "beam_from_env", "budget_from_env"]
