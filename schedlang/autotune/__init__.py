"""Autotuning (SPEC §4): the search over schedules, the cost model and the tuning database.

``autotune(C, beam=4, budget_s=60)`` returns the best ``sl.Schedule`` found and stores it
in the tuning database, from which a later ``sl.compile(C)`` without a schedule takes it;
``BEAM=N`` in the environment makes ``sl.compile`` tune by itself. Modules: ``keys``
(what identifies a problem), ``database`` (SQLite store), ``templates`` (seed schedules),
``space`` (actions), ``measure`` (compile pool, checks, timing), ``features`` and
``cost_model`` (the learned ranking), ``search`` (the beam search), ``progress``,
``integration`` (what ``sl.compile`` calls). Example::

    s = sl.autotune(C, beam=4, budget_s=30)
    print(s)                       # the schedule as Python
"""
from .search import autotune, tune, TuningResult, TuningReport  # noqa: F401
from .database import TuningDatabase, cache_root  # noqa: F401
from .cost_model import CostModel, rank_correlation, spearman  # noqa: F401
from .features import FEATURE_NAMES, FEATURE_VERSION, loop_features  # noqa: F401

__all__ = ["autotune", "tune", "TuningResult", "TuningReport", "TuningDatabase", "cache_root",
           "CostModel", "rank_correlation", "spearman", "FEATURE_NAMES", "FEATURE_VERSION",
           "loop_features"]
