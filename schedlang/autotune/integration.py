"""What ``sl.compile(f)`` without a schedule asks the autotuner (SPEC §3, §4).

A tuned schedule stored in the database for this workload, target and thread count is
used; else, when the environment sets ``BEAM=N``, the pipeline is tuned now with beam width
N (budget: ``SCHEDLANG_BEAM_BUDGET_S`` seconds, default 55, which leaves the program that
called ``sl.compile`` a few seconds of a minute) and the result stored, so the next run
loads it without searching; else the caller falls back to the default schedule. The check
costs nothing when there is no database file and no ``BEAM``. The thread count is the one
a compiled kernel runs with: ``SCHEDLANG_NUM_THREADS``, else every core.
Example::

    s = tuned_schedule([C], "llvm")      # a Schedule, or None: use the default
"""
from __future__ import annotations

import os
import warnings

from ..errors import CompileError, ScheduleError, SchedlangError
from . import database
from .database import TuningDatabase

DEFAULT_BEAM_BUDGET_S = 55.0

# The origin of a choice that found no tuned schedule (see ``choose_schedule``).
DEFAULT_ORIGIN = "default"


def beam_from_env():
    """The beam width ``BEAM`` asks for (0 when unset, empty or 0). A value that is not an
    int >= 0 raises ScheduleError: a typo must not quietly turn tuning off.
    Example: ``beam_from_env()  # 4 under BEAM=4``."""
    text = os.environ.get("BEAM", "").strip()
    if not text:
        return 0
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise ScheduleError(f"BEAM={text!r}: the beam width must be an int >= 1 (0 or unset: "
                            "no tuning); set e.g. BEAM=4, or unset BEAM")
    return n


def seconds_from_env(name, default):
    """``(seconds, text)`` from environment variable ``name``: ``default`` when it is unset
    or empty, None for seconds when its text is not a finite number > 0 (the caller says
    what to set). Example: ``seconds_from_env("SCHEDLANG_BEAM_BUDGET_S", 55.0)``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default, text
    try:
        value = float(text)
    except ValueError:
        return None, text
    return (value if 0 < value < float("inf") else None), text


def budget_from_env():
    """Seconds a BEAM search may take: ``SCHEDLANG_BEAM_BUDGET_S`` or 55. A value that is
    not a number of seconds > 0 raises ScheduleError. Example: ``budget_from_env()``."""
    value, text = seconds_from_env("SCHEDLANG_BEAM_BUDGET_S", DEFAULT_BEAM_BUDGET_S)
    if value is None:
        raise ScheduleError(f"SCHEDLANG_BEAM_BUDGET_S={text!r}: the tuning budget must be a "
                            "finite number of seconds > 0; set e.g. SCHEDLANG_BEAM_BUDGET_S=30, "
                            f"or unset it for {DEFAULT_BEAM_BUDGET_S:g} s")
    return value


def tuning_state():
    """A cheap fingerprint of what decides the schedule ``sl.compile(f)`` without one picks,
    apart from ``f``, its target and the thread count: ``BEAM`` and the tuning database
    (``database.state()``). While it stays equal, so does the choice, so a cache of
    compiled kernels may reuse its kernel without asking the database again.
    Example: ``before = tuning_state(); sl.autotune(C); tuning_state() != before``."""
    return os.environ.get("BEAM", "").strip(), database.state()


def choose_schedule(outputs, target="llvm", default=None, allow_tuning=True, threads=None):
    """``(schedule, origin)``: what ``sl.compile(outputs)`` without a schedule uses, and
    where it came from. ``schedule`` is the database's tuned one for this workload, target
    and ``threads`` (default: as a compiled kernel runs), else (with ``BEAM=N`` and
    ``allow_tuning``) a freshly tuned one seeded with ``default``, else None: the caller's
    default. ``origin`` is ``DEFAULT_ORIGIN`` for None, else a hashable value naming the
    database row, equal for two calls exactly when they chose the same stored schedule.
    Example: ``schedule, origin = choose_schedule([C], "llvm")``."""
    beam = beam_from_env()
    db = TuningDatabase()
    if not beam and not os.path.exists(db.path):
        return None, DEFAULT_ORIGIN
    from .keys import estimated_sizes, estimated_sizes_note, symbolic_sizes, workload_key
    sizes = None
    try:
        if symbolic_sizes(outputs):
            # tuned (and later looked up) at estimated sizes; the schedule fits any size
            sizes = estimated_sizes(outputs)
        key = workload_key(outputs, target, sizes, threads=threads)
    except SchedlangError as e:
        if beam and allow_tuning:
            warnings.warn(f"schedlang: BEAM is set but {', '.join(o.name for o in outputs)} "
                          f"cannot be tuned ({e}); compiling with the default schedule",
                          stacklevel=4)
        return None, DEFAULT_ORIGIN
    row = db.best_row(key, min_beam=beam)
    if row is None and sizes:
        # tuned with sl.autotune(f, sizes={...}) at the sizes the user runs: it fits any
        row = db.best_row(key, min_beam=beam, any_size=True)
    if row is not None:
        found = database.schedule_from_row(row, key, outputs, db.path)
        if found is not None:
            return found, _origin(key, row)
    if not beam or not allow_tuning or target.split(":", 1)[0] != "llvm":
        return None, DEFAULT_ORIGIN
    from .search import tune
    seeds = [default] if default is not None else []
    if sizes:
        warnings.warn(estimated_sizes_note(outputs, sizes), stacklevel=4)
    try:
        tuned = tune(outputs, target, beam=beam, budget_s=budget_from_env(), seeds=seeds,
                     threads=key.threads, sizes=sizes).schedule
    except CompileError as e:
        if target == "llvm":
            raise
        # code for another CPU that this one cannot run cannot be timed here; compiling it
        # (to inspect, or to run elsewhere) still works with the default schedule
        warnings.warn(f"schedlang: BEAM is set but candidates for {target} cannot be timed on "
                      f"this machine ({e}); compiling with the default schedule", stacklevel=4)
        return None, DEFAULT_ORIGIN
    row = db.best_row(key, min_beam=beam)
    if row is not None and row["schedule"] == tuned.to_json():
        return tuned, _origin(key, row)
    # not stored (the database is not writable): nothing later can choose it again
    return tuned, ("not stored", tuned.to_json())


def _origin(key, row):
    return key.digest, row["created"], row["schedule"]


def tuned_schedule(outputs, target="llvm", default=None, allow_tuning=True, threads=None):
    """The schedule ``sl.compile(outputs)`` should use when none is given: the database's
    tuned one for this workload, target and thread count, else (with ``BEAM=N`` and
    ``allow_tuning``) a freshly tuned one seeded with ``default``, else None. Example:
    ``tuned_schedule([C], "llvm") or sl.Schedule(C)``."""
    return choose_schedule(outputs, target, default, allow_tuning, threads)[0]


__all__ = ["tuned_schedule", "choose_schedule", "tuning_state", "beam_from_env",
           "budget_from_env", "DEFAULT_ORIGIN"]
