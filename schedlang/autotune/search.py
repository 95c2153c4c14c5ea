"""``sl.autotune``: beam search over schedule actions, within a wall-clock budget.

The search measures the default schedule (whose output is the reference every candidate
must reproduce) and the template seeds (``templates.py``), keeps the ``beam`` fastest
correct schedules, and each round proposes their children one action away
(``space.py``). Candidates compile in a process pool; the parent checks and times them
(``measure.py``). With ``strategy="model"`` every child is lowered for its loop-IR
features but only the ones the cost model ranks best are compiled and timed. The search
stops when the budget is spent, or when two rounds in a row gain less than 1%. The
finalists are timed again, the best is stored in the tuning database with every
measurement, and (on a terminal) a summary is printed.
Example::

    s = sl.autotune(C, beam=4, budget_s=30)
    kern = sl.compile(C, s)
"""
from __future__ import annotations

import inspect
import math
import numbers
import os
import random
import time
import warnings
from collections.abc import Mapping

from ..algo.func import Func
from ..errors import CompileError, ScheduleError, SchedlangError
from ..compiler import output_funcs
from ..schedule.schedule import Schedule
from .cost_model import CostModel, train_from_measurements
from .database import Measurement, TuningDatabase, TuningDatabaseError
from .features import FEATURE_VERSION
from .keys import (check_threads, concrete_sizes, estimated_sizes, estimated_sizes_note,
                   size_names, symbolic_sizes, workload_key)
from .measure import Bench, CompilePool, kernel_result
from .progress import Progress
from .space import children, realize, size_estimates
from .templates import seed_schedules

STRATEGIES = ("beam", "model")
# How long past the budget the known start points (a stored, given or frontend schedule)
# may still be compiled and timed.
KNOWN_SEED_GRACE_S = 30.0
# Rounds in a row without this relative gain end the search before the budget does.
MIN_GAIN = 0.01
PATIENCE = 2
# The model strategy's rounds time few candidates, so it may go on longer without a gain.
MODEL_PATIENCE = 4
FINALISTS = 5
# seconds of turns each finalist gets when they are timed again at the end
FINAL_RETIME_S = 0.3


class Candidate:
    """A measured (or failed) schedule: ``schedule``, ``action`` that made it, ``status``
    ("ok", "wrong", "error"), ``time_s``, loop-IR ``features`` and ``ir_hash``."""

    __slots__ = ("schedule", "action", "status", "time_s", "features", "ir_hash", "json",
                 "result")

    def __init__(self, schedule, action, status="error", time_s=None, result=None):
        self.schedule, self.action, self.status = schedule, action, status
        self.time_s, self.result = time_s, result
        self.features = result.features if result is not None and result.ok else None
        self.ir_hash = result.ir_hash if result is not None else ""
        self.json = schedule.to_json() if schedule is not None else ""


class TuningReport:
    """What a tuning run did: times of the best and the default schedule, how many
    candidates were proposed, measured, failed (compile errors, crashes, timeouts) and
    wrong, how many moves the legality checks rejected (``ScheduleError``, before any
    machine code), rounds, elapsed seconds, and whether and where the result was stored."""

    def __init__(self):
        self.best_s = None
        self.default_s = None
        self.proposed = self.measured = self.failed = self.wrong = self.duplicates = 0
        self.rejected = 0          # moves the legality checks refused before any compile
        self.retimed = 0           # finalists timed again at the end (measurements too)
        self.unfinished = 0        # compiles cut off by the end of the budget
        self.rounds = 0
        self.elapsed_s = 0.0
        self.stored = False
        self.database = ""
        self.strategy = "beam"
        self.history = []          # (round, best seconds after it)
        self.errors = []           # (action, error kind, message) of failed candidates
        self.rejections = []       # (action, error kind, message) of rejected moves

    def __repr__(self):
        return (f"<TuningReport best={self.best_s} default={self.default_s} "
                f"measured={self.measured} failed={self.failed} wrong={self.wrong} "
                f"rounds={self.rounds}>")


class TuningResult:
    """The best ``schedule`` found and the ``report`` of the run."""

    def __init__(self, schedule, report):
        self.schedule, self.report = schedule, report


def pipeline_outputs(f):
    """``(outputs list, extra seed schedule or None)`` of a Func, a frontend Tensor (whose
    own default schedule becomes a seed), or a list of them (``output_funcs``).
    Example: ``pipeline_outputs(C) == ([C], None)``."""
    for o in f if isinstance(f, (list, tuple)) else [f]:
        if not isinstance(o, Func) and not hasattr(o, "__schedlang_pipeline__"):
            raise ScheduleError(f"autotune needs the output Func(s) of a pipeline, or frontend "
                                f"Tensors; got {o!r}")
    return output_funcs(f, caller="autotune")


def _check_options(target, beam, budget_s, strategy):
    """Raise a SchedlangError naming the argument and what to pass for a bad option."""
    if not isinstance(target, str) or target.split(":", 1)[0] != "llvm":
        raise CompileError(f"autotune(target={target!r}): tuning runs every candidate on this "
                           "machine's CPU, so the target must be 'llvm' or 'llvm:<cpu>'")
    if isinstance(beam, bool) or not isinstance(beam, numbers.Integral) or beam < 1:
        raise ScheduleError(f"autotune(beam={beam!r}): the beam width must be an int >= 1 (how "
                            "many of the fastest schedules each round keeps); pass e.g. beam=4")
    if isinstance(budget_s, bool) or not isinstance(budget_s, numbers.Real) or \
            not 0 < budget_s < math.inf:
        raise ScheduleError(f"autotune(budget_s={budget_s!r}): the budget must be a finite "
                            "number of seconds > 0; pass e.g. budget_s=60")
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ScheduleError(f"autotune(strategy={strategy!r}): the strategy must be 'beam' "
                            "(measure every candidate) or 'model' (measure those the cost model "
                            "ranks best)")


def _check_extra_options(jobs, seeds, sizes, database, flags=(), rng_seed=0):
    """Raise ScheduleError naming the option for a ``jobs``, ``seeds``, ``sizes``,
    ``database``, on/off flag (``flags``: (name, value, None allowed) triples) or
    ``rng_seed`` of the wrong kind (seeds that are not Schedules are checked later)."""
    for name, value, none_ok in flags:
        if not (isinstance(value, bool) or (none_ok and value is None)):
            raise ScheduleError(f"autotune({name}={value!r}): {name} must be True or False"
                                + (", or None for the default" if none_ok else ""))
    if isinstance(rng_seed, bool) or not isinstance(rng_seed, numbers.Integral):
        raise ScheduleError(f"autotune(rng_seed={rng_seed!r}): the seed of the search's random "
                            "choices must be an int, e.g. rng_seed=0")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral)
                             or jobs < 1):
        raise ScheduleError(f"autotune(jobs={jobs!r}): the number of compile processes must be "
                            "an int >= 1, or None for one per core")
    if isinstance(seeds, (str, bytes, Schedule)) or not hasattr(seeds, "__iter__"):
        raise ScheduleError(f"autotune(seeds={seeds!r}): seeds must be a list of Schedules of "
                            "the pipeline to start the search from, e.g. seeds=[s]")
    if sizes is not None and (not isinstance(sizes, Mapping) or not all(
            isinstance(k, str) and isinstance(v, numbers.Integral) and not isinstance(v, bool)
            for k, v in sizes.items())):
        raise ScheduleError(f"autotune(sizes={sizes!r}): sizes must be a dict from symbolic "
                            "size names to ints, e.g. sizes={'N': 1024}")
    if database is not None and not isinstance(database, (str, bytes, os.PathLike)):
        raise ScheduleError(f"autotune(database={database!r}): the database must be a file "
                            "path (str or os.PathLike), or None for the default")
    if database is not None and os.path.isdir(database):
        # sqlite cannot open a directory: the result would silently go unstored
        raise ScheduleError(f"autotune(database={database!r}): that is a directory; the "
                            "database is one file: pass its path, e.g. "
                            f"database={os.path.join(os.fsdecode(database), 'tuning.sqlite3')!r}")


class _Search:
    def __init__(self, outputs, target, beam, budget_s, strategy, threads, shapes, jobs,
                 key, progress, rng_seed):
        self.outputs, self.target, self.beam, self.key = outputs, target, beam, key
        self.strategy, self.threads = strategy, threads
        self.start = time.perf_counter()
        # the end of the search proper; the rest of the budget re-times the finalists
        self.end = self.start + budget_s
        self.deadline = self.end - min(0.1 * budget_s, FINAL_RETIME_S * FINALISTS + 0.3)
        self.progress = progress
        self.rng = random.Random(rng_seed)
        self.report = TuningReport()
        self.report.strategy = strategy
        self.original = {g.name for g in Schedule(*outputs).funcs}
        self.cap = max(8, 4 * beam)
        self.seen = set()
        self.by_ir = {}
        self.good = []              # Candidates with status ok
        self.records = []           # Measurements for the database
        self.history = []           # older database measurements for the model
        self.model = CostModel()
        self.spent_per_candidate = []
        self.bench = Bench(outputs, target, threads, shapes)
        self.report.default_s = self.bench.default_s
        self.pool = CompilePool(outputs, target, jobs, threads)

    # ------------------------------------------------------------------ helpers
    def left(self):
        return self.deadline - time.perf_counter()

    def best(self):
        return min(self.good, key=lambda c: c.time_s) if self.good else None

    def _fail(self, action, kind, message):
        if kind == "timeout" and self.left() <= 0:
            self.report.unfinished += 1
            return
        if kind == "ScheduleError":
            # a legality check that runs when the whole schedule is known (compute_at
            # placement, loops of an inline Func) refused the move; nothing was compiled
            self.report.rejected += 1
            self.report.rejections.append((action, kind, message))
            return
        self.report.failed += 1
        self.report.errors.append((action, kind, message))

    def affordable(self, wanted):
        """How many of ``wanted`` candidates fit in the time left, judged by the wall time
        candidates have taken so far (compile in the pool plus checking and timing)."""
        if not self.spent_per_candidate:
            return wanted
        per = sum(self.spent_per_candidate) / len(self.spent_per_candidate)
        # (a float min first: a huge budget_s leaves an inf here, which int() refuses)
        return max(1, int(min(wanted, self.left() / max(per, 1e-3))))

    def _record(self, cand):
        self.records.append(Measurement(cand.json, cand.time_s, cand.status, cand.features,
                                        FEATURE_VERSION, self.key.digest))

    def _train(self):
        self.model = train_from_measurements(self.history + [
            m for m in self.records if m.status == "ok" and m.time_s],
            focus_key=self.key.digest)

    # ------------------------------------------------------------------ measuring
    def add_default(self):
        """The default schedule, measured once while making the reference output."""
        s = self.bench.default_schedule
        res = kernel_result(self.bench.default_kernel, self.threads)
        cand = Candidate(s, "default", "ok", self.bench.default_s, res)
        self.seen.add(cand.json)
        self.by_ir[cand.ir_hash] = cand
        self.good.append(cand)
        self._record(cand)

    def evaluate(self, items, n_measure=None, always=(), past_budget=False):
        """Compile and measure ``items`` (``(action, Schedule)``); with ``n_measure`` only the
        items whose actions are in ``always`` and the ``n_measure`` others the cost model
        ranks best are compiled and timed. ``past_budget``: measure them even when the
        budget is spent (up to KNOWN_SEED_GRACE_S more)."""
        items = [(a, s) for a, s in items if s.to_json() not in self.seen]
        keep_first = sum(1 for a, _ in items if a in always)
        # the items to time in any case go first
        items = [x for x in items if x[0] in always] + [x for x in items if x[0] not in always]
        for _, s in items:
            self.seen.add(s.to_json())
        deadline = self.deadline
        # a known schedule's compile is not given up as hung after HANG_MIN_S: it may take
        # that long on a slow machine, and the search must not end slower than it
        min_wait_s = None
        if past_budget:
            deadline = max(deadline, time.perf_counter() + KNOWN_SEED_GRACE_S)
            min_wait_s = KNOWN_SEED_GRACE_S
        if not items or (self.left() <= 0 and not past_budget):
            return
        t0 = time.perf_counter()
        self.report.proposed += len(items)
        jsons = [s.to_json() for _, s in items]
        if n_measure is None or n_measure + keep_first >= len(items):
            results = self.pool.run(jsons, jit=True, deadline=deadline, min_wait_s=min_wait_s)
        else:
            results = self.pool.run(jsons, jit=False, deadline=deadline, min_wait_s=min_wait_s)
            ok = [k for k, r in enumerate(results) if r.ok]
            self._train()
            scores = self.model.predict([results[k].features for k in ok]) if ok else []
            ranked = [ok[k] for k in sorted(range(len(ok)), key=lambda k: scores[k])]
            # the items to time in any case, those of them that lowered (the first
            # keep_first of ok are not those when one of them failed to lower)
            chosen = [k for k in ok if k < keep_first]
            chosen += [k for k in ranked if k not in chosen][:n_measure]
            compiled = self.pool.compile_lowered([results[k] for k in chosen], deadline,
                                                 min_wait_s=min_wait_s)
            for k, r in zip(chosen, compiled):
                results[k] = r
            for k, r in enumerate(results):
                if not r.ok:
                    self._fail(items[k][0], r.kind, r.message)
            items = [items[k] for k in chosen]
            results = [results[k] for k in chosen]
        if n_measure is None or n_measure + keep_first >= len(jsons):
            for k, r in enumerate(results):
                if not r.ok:
                    self._fail(items[k][0], r.kind, r.message)
        self._measure(items, results, past_budget)
        self.spent_per_candidate.append((time.perf_counter() - t0) / max(1, len(jsons)))

    def _measure(self, items, results, past_budget=False):
        for (action, s), r in zip(items, results):
            if not r.ok:
                continue
            if r.ir_hash in self.by_ir:
                self.report.duplicates += 1
                continue
            # a candidate that compiled in time is still checked and timed (briefly) in the
            # part of the budget kept for timing the finalists again: a budget that ran out
            # while the round compiled threw the whole round away, and in round 0 (a
            # loaded machine, slow compiles) the search returned the default schedule
            best = self.best()
            left = self.end - time.perf_counter()
            # a candidate's checked run takes about the best time so far: one that cannot
            # end within the budget is not started (a 4-second default made a 10-second
            # search take 13)
            if (left <= 0 or (best is not None and best.time_s > left)) and not past_budget:
                break
            try:
                kern = self.bench.kernel(s, r)
                status, t = self.bench.check_and_time(kern, best.time_s if best else None,
                                                      budget_s=min(0.25, max(0.02, self.left())))
            except SchedlangError as e:
                self._fail(action, type(e).__name__, str(e))
                continue
            cand = Candidate(s, action, status, t, r)
            self.by_ir[r.ir_hash] = cand
            self.report.measured += 1
            self._record(cand)
            if status == "wrong":
                self.report.wrong += 1
            else:
                self.good.append(cand)

    # ------------------------------------------------------------------ the search
    def proposals(self, parents):
        """Children of the beam, round-robin over parents, edits and appends interleaved."""
        lists = []
        for cand in parents:
            props = [c for c in children(cand.schedule, self.original) if c.key not in self.seen]
            edits = [c for c in props if c.kind == "edit"]
            appends = [c for c in props if c.kind != "edit"]
            self.rng.shuffle(edits)
            self.rng.shuffle(appends)
            mixed = []
            for k in range(max(len(edits), len(appends))):
                mixed += edits[k:k + 1] + appends[k:k + 1]
            lists.append(mixed)
        want = self.affordable(self.cap if self.strategy == "beam" else 2 * self.cap)
        # a move the legality checks refuse costs no compile: it is counted as rejected and
        # the next proposal takes its place, so a round still tries ``want`` schedules
        items, keys = [], set()
        while len(items) < want and any(lists):
            for lst in lists:
                while lst:
                    c = lst.pop(0)
                    if c.key in keys:
                        continue
                    keys.add(c.key)
                    try:
                        items.append((c.action, realize(c, self.outputs)))
                        break
                    except (SchedlangError, TypeError, ValueError) as e:
                        self.seen.add(c.to_json())
                        self.report.rejected += 1
                        self.report.rejections.append((c.action, type(e).__name__, str(e)))
                if len(items) >= want:
                    break
        return items

    def run(self, seeds):
        self.add_default()
        # a stored, given or frontend schedule is compiled and timed before the templates,
        # whose compiles can take the whole budget on a large pipeline; even past a tiny
        # budget, since the result must not be slower than a schedule the caller knows
        known = [x for x in seeds if x[0] in KNOWN_SEEDS]
        if known:
            self.evaluate(known, past_budget=True)
            seeds = [x for x in seeds if x[0] not in KNOWN_SEEDS]
        if self.strategy == "model":
            # seeds come best guess first within each template family: the first of each
            # family (and a stored or given schedule) is timed, and two more the model picks
            first, families = set(), set()
            for action, _ in seeds:
                family = action.split("(", 1)[0]
                if family not in families:
                    families.add(family)
                    first.add(action)
            self.evaluate(seeds, n_measure=2, always=first)
        else:
            self.evaluate(seeds)
        self._round_done(0)
        stale = 0
        while self.left() > 0:
            parents = sorted(self.good, key=lambda c: c.time_s)[:self.beam]
            before = self.best().time_s
            items = self.proposals(parents)
            if not items:
                break
            # the model strategy times an eighth of a beam round's candidates (its pick of
            # twice as many) and goes on longer, measuring under a third as much in all
            n_measure = None if self.strategy == "beam" else max(2, self.cap // 8)
            self.evaluate(items, n_measure)
            self.report.rounds += 1
            self._round_done(self.report.rounds)
            gain = (before - self.best().time_s) / before
            stale = 0 if gain > MIN_GAIN else stale + 1
            if stale >= (PATIENCE if self.strategy == "beam" else MODEL_PATIENCE):
                break
        return self.finish()

    def _round_done(self, n):
        best = self.best()
        self.report.history.append((n, best.time_s))
        self.progress.round(n, self.report.measured, self.report.failed, self.report.wrong,
                            best.time_s, self.report.default_s, self.left(),
                            time.perf_counter() - self.start)

    def finish(self):
        """Time the finalists again in turns (when the budget allows) and pick the best of
        them by those timings, which are recorded as measurements too."""
        finalists = sorted(self.good, key=lambda c: c.time_s)[:FINALISTS]
        best = finalists[0]
        left = self.end - time.perf_counter()
        # each finalist runs six times at least (a warm-up and five turns): slow ones are
        # kept at their search times rather than overrun the budget
        if len(finalists) > 1 and left > max(0.1, 6 * sum(c.time_s for c in finalists)):
            timed = []
            for cand in finalists:
                try:
                    timed.append((cand, self.bench.kernel(cand.schedule, cand.result)
                                  if cand.action != "default" else self.bench.default_kernel))
                except SchedlangError:
                    continue
            # the fastest search time is the luckiest of many noisy ones, and each was taken
            # at another moment; timed in turns, a slow spell of the machine hits every
            # finalist alike, and these medians alone decide
            times = self.bench.retime_in_turns([k for _, k in timed],
                                               budget_s=min(FINAL_RETIME_S * len(timed),
                                                            left - 0.05))
            for (cand, _), t in zip(timed, times):
                cand.time_s = t
                self._record(cand)
                self.report.retimed += 1
            if timed:
                best = min((cand for cand, _ in timed), key=lambda c: c.time_s)
        self.report.best_s = best.time_s
        self.report.elapsed_s = time.perf_counter() - self.start
        return best

    def close(self):
        self.pool.close()


# the names of start points that are whole schedules, not templates
STORED_SEED, GIVEN_SEED, FRONTEND_SEED = "database best", "given seed", "frontend default"
KNOWN_SEEDS = (STORED_SEED, GIVEN_SEED, FRONTEND_SEED)


def _check_size_names(outputs, sizes):
    """Raise ScheduleError for a ``sizes`` name no Input or output shape of the pipeline
    uses (a typo would otherwise be tuned at other sizes than the user meant)."""
    known = set(symbolic_sizes(outputs)) | size_names(o.shape or () for o in outputs)
    unknown = sorted(set(sizes) - known)
    if unknown:
        uses = f"it uses {', '.join(sorted(known))}" if known else "its sizes are all constants"
        raise ScheduleError(f"autotune(sizes=...): {', '.join(map(repr, unknown))} "
                            f"{'is not a size' if len(unknown) == 1 else 'are not sizes'} of "
                            f"{', '.join(o.name for o in outputs)}'s pipeline ({uses}); "
                            "pass values for those names only")


def tune(f, target="llvm", beam=4, budget_s=60, strategy="beam", *, threads=None, sizes=None,
         seeds=(), jobs=None, database=None, progress=None, summary=True, store=True,
         rng_seed=0):
    """Tune the pipeline ``f`` and return a TuningResult (the best ``schedule`` and the
    ``report``); ``autotune`` is the same but returns the Schedule only. ``threads``: the
    threads each candidate runs on (default: ``SCHEDLANG_NUM_THREADS`` or every core), part
    of the database key, so ``sl.compile`` uses the result only for kernels that run on as
    many threads; ``sizes``: values of symbolic
    sizes; ``seeds``: extra Schedules to start from; ``jobs``: compile processes;
    ``database``: path of the tuning database; ``progress``: None (on a terminal only),
    True or False, for the per-round report and the final summary; ``summary``: False
    leaves the summary out; ``store``: write the result to the database.
    Example: ``tune(C, budget_s=10).report.measured``."""
    _check_options(target, beam, budget_s, strategy)
    threads = check_threads(threads)
    _check_extra_options(jobs, seeds, sizes, database, rng_seed=rng_seed, flags=(
        ("progress", progress, True), ("summary", summary, False), ("store", store, False)))
    seeds = tuple(seeds)
    beam, budget_s = int(beam), float(budget_s)
    outputs, extra = pipeline_outputs(f)
    for s in seeds:
        if not isinstance(s, Schedule) or [o.name for o in s.outputs] != [o.name for o in outputs]:
            raise ScheduleError(f"autotune(seeds=...): {s!r} is not a Schedule of "
                                f"{', '.join(o.name for o in outputs)}")
    if sizes:
        _check_size_names(outputs, sizes)
    if sizes is None and symbolic_sizes(outputs):
        # as BEAM=N does: tuned (and stored, for sl.compile to find) at estimated sizes
        sizes = estimated_sizes(outputs)
        warnings.warn(estimated_sizes_note(outputs, sizes), stacklevel=3)
    shapes = concrete_sizes(outputs, sizes)
    key = workload_key(outputs, target, sizes, threads)
    db = TuningDatabase(database)
    name = ", ".join(o.name for o in outputs)
    prog = Progress(name, budget_s, progress, summary_enabled=summary)
    with size_estimates(sizes):     # templates size their tiles at the sizes tuned for
        start_items = [(nm, s) for nm, s in seed_schedules(outputs, threads, target)]
    if extra is not None:
        start_items.insert(0, (FRONTEND_SEED, extra))
    start_items = [(GIVEN_SEED, s) for s in seeds] + start_items
    stored = db.load_schedule(key, outputs)
    if stored is not None:
        start_items.insert(0, (STORED_SEED, stored))
    search = _Search(outputs, target, beam, budget_s, strategy, threads, shapes, jobs, key, prog,
                     rng_seed)
    try:
        if strategy == "model":
            search.history = db.measurements(key.machine, FEATURE_VERSION)
        with size_estimates(sizes):     # and so do the search's moves
            best = search.run(start_items)
    finally:
        search.close()
    report = search.report
    report.database = db.path
    if store:
        try:
            db.add_measurements(key, search.records)
            report.stored = db.store_best(key, best.schedule, best.time_s, beam, strategy)
        except TuningDatabaseError as e:
            warnings.warn(f"schedlang: the tuning result of {name} was not stored ({e})",
                          stacklevel=2)
    prog.summary(report, best.schedule)
    return TuningResult(best.schedule, report)


def autotune(f, target="llvm", beam=4, budget_s=60, strategy="beam", **options):
    """Search for a fast schedule of ``f`` (a Func, a list of output Funcs, or a frontend
    Tensor) and return the best ``sl.Schedule`` found within ``budget_s`` seconds; the
    result and every measurement go to the tuning database, so a later
    ``sl.compile(f)`` uses it. ``strategy="model"`` measures only what the cost model ranks
    best. Other options as in ``tune``.
    Example: ``s = sl.autotune(C, beam=4, budget_s=60); sl.compile(C, s)``."""
    known = [n for n, p in inspect.signature(tune).parameters.items()
             if p.kind == p.KEYWORD_ONLY]
    for name in options:
        if name not in known:
            raise ScheduleError(f"autotune: no option named {name!r}; the options are target, "
                                f"beam, budget_s, strategy, {', '.join(known)}")
    return tune(f, target, beam, budget_s, strategy, **options).schedule


__all__ = ["autotune", "tune", "TuningResult", "TuningReport", "pipeline_outputs"]
