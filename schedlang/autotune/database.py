"""The tuning database: SQLite in WAL mode under the schedlang cache directory.

One row per tuning problem holds the best schedule found (as schedule JSON, never pickled
code), and one row per measured candidate holds its schedule, its time (or why it had
none) and its loop-IR features, which train the cost model. Several processes may tune
and read at once: every write is one ``BEGIN IMMEDIATE`` transaction, readers wait on a
busy timeout, and a process killed mid-write leaves the database as it was before its
transaction (SQLite's journal). Rows that cannot be used (bad JSON, a schedule that no
longer replays onto the algorithm) are skipped with a ``warnings.warn``.
Example::

    db = TuningDatabase()                       # $SCHEDLANG_CACHE/tuning.sqlite3
    db.store_best(key, schedule, time_s=0.012, beam=4)
    s = db.load_schedule(key, [C])              # the stored schedule replayed onto C, or None
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
import warnings

from ..errors import SchedlangError
from ..schedule.schedule import Schedule
from ..targets.llvm_jit import cache_root
from .keys import ACTION_VERSION

SCHEMA_VERSION = 1
DB_FILE = "tuning.sqlite3"
# How long a writer waits for another process's transaction before giving up (seconds).
BUSY_TIMEOUT_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS best (
    key TEXT PRIMARY KEY, algo_hash TEXT, sizes TEXT, dtypes TEXT, target TEXT,
    machine TEXT, action_version INTEGER, names TEXT, schedule TEXT, time_s REAL,
    beam INTEGER, strategy TEXT, threads INTEGER, created REAL);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, machine TEXT, schedule TEXT,
    time_s REAL, status TEXT, feature_version INTEGER, features TEXT, created REAL);
CREATE INDEX IF NOT EXISTS measurements_by_key ON measurements (key);
CREATE INDEX IF NOT EXISTS measurements_by_machine ON measurements (machine, feature_version);
"""


# Transactions this process committed to any tuning database; part of ``state()``, so a
# write is seen even when it leaves the files' size and modification time as they were.
_WRITES = 0


# SQLite INTEGER is 64-bit: a wider beam is kept as this (no search is that wide anyway).
_SQL_INT_MAX = 2 ** 63 - 1


def _sql_int(n):
    """``n`` as an int SQLite can hold (a beam of 10**30 is stored as 2**63 - 1)."""
    return min(int(n), _SQL_INT_MAX)


class TuningDatabaseError(SchedlangError):
    """The tuning database cannot be opened or written (a path that is not writable)."""


def default_path():
    """Where the tuning database lives: ``cache_root()/tuning.sqlite3``.
    Example: ``default_path()``."""
    return os.path.join(cache_root(), DB_FILE)


def state(path=None):
    """A cheap fingerprint of the tuning database at ``path`` (default ``default_path()``):
    equal fingerprints mean no transaction was committed in between, so a schedule chosen
    from the database then is still the one it would give now. It is the size and
    modification time of the database file and of its write-ahead log (another process's
    commit changes one of them) and this process's count of commits. Costs two ``stat``
    calls, no SQLite. Example: ``before = state(); ...; state() != before``."""
    path = os.fspath(path) if path is not None else default_path()
    stamp = [path, _WRITES]
    for name in (path, path + "-wal"):
        try:
            st = os.stat(name)
            stamp.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append(None)
    return tuple(stamp)


class Measurement:
    """One measured candidate: its schedule JSON, time in seconds (None when it failed or
    was wrong), ``status`` ("ok", "wrong", "error") and its loop-IR feature vector."""

    __slots__ = ("schedule_json", "time_s", "status", "features", "feature_version", "key")

    def __init__(self, schedule_json, time_s, status, features=None, feature_version=None,
                 key=None):
        self.schedule_json, self.time_s, self.status = schedule_json, time_s, status
        self.features, self.feature_version, self.key = features, feature_version, key


class TuningDatabase:
    """The SQLite tuning database at ``path`` (default ``default_path()``).

    Opening is lazy: reading a database that does not exist returns nothing and creates no
    file. Example: ``TuningDatabase(tmp / "t.sqlite3").best_row(key)``.
    """

    def __init__(self, path=None):
        self.path = os.fspath(path) if path is not None else default_path()
        self._conn = None
        self._writable = False

    # ------------------------------------------------------------------ connection
    def _connect(self, create):
        if self._conn is not None and (self._writable or not create):
            return self._conn
        if self._conn is not None:       # opened for reading; reopen to set up writing
            self.close()
        if not create and not os.path.exists(self.path):
            return None
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # a reader needs neither: WAL mode is a property of the file, set by the first
            # writer, and the schema exists once anything was written
            if create:
                _retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
                conn.execute("PRAGMA synchronous = NORMAL")
                _retry(lambda: self._create_schema(conn))
        except (sqlite3.Error, OSError) as e:
            raise TuningDatabaseError(f"the tuning database {self.path} cannot be opened "
                                      f"({e}); {_advice(e)}") from None
        self._conn, self._writable = conn, create
        if create:
            self._check_schema(conn)
        return conn

    def _read_only(self, immutable):
        """A read-only connection. A WAL database in a directory this process may not write
        opens so when its ``-shm`` file exists, else only as ``immutable`` (which reads the
        main file alone: what no writer checkpointed is not seen)."""
        self.close()
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro" + (
            "&immutable=1" if immutable else "")
        self._conn, self._writable = sqlite3.connect(uri, uri=True, isolation_level=None), False
        return self._conn

    def _check_schema(self, conn):
        """Refuse a database a newer schedlang wrote (``meta.schema`` above ours): its rows
        may mean something else, and writing would mix the two."""
        try:
            row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        except sqlite3.Error:
            return
        if row is not None and not (str(row[0]).isdigit() and int(row[0]) <= SCHEMA_VERSION):
            self.close()
            raise TuningDatabaseError(
                f"the tuning database {self.path} has schema {row[0]!r}, newer than this "
                f"schedlang's ({SCHEMA_VERSION}); upgrade schedlang, or set SCHEDLANG_CACHE to "
                "another directory")

    @staticmethod
    def _create_schema(conn):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self):
        """Close the connection (a later call reopens it)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _write(self, fn):
        """Run ``fn(conn)`` in one IMMEDIATE transaction (retried while another process holds
        the write lock); an error rolls it back."""
        conn = self._connect(create=True)

        def txn():
            global _WRITES
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
                conn.execute("COMMIT")
                _WRITES += 1
                return out
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        try:
            return _retry(txn)
        except sqlite3.Error as e:
            raise TuningDatabaseError(f"cannot write the tuning database {self.path} ({e}); "
                                      f"{_advice(e)}") from None

    # ------------------------------------------------------------------ best schedules
    def best_row(self, key, min_beam=0, any_size=False):
        """The stored best entry for WorkloadKey ``key`` as a dict (``schedule``, ``names``,
        ``time_s``, ``beam``, ...), or None; entries tuned with a beam narrower than
        ``min_beam`` are not returned. ``any_size``: the newest entry of the same algorithm,
        dtypes, target, machine and threads at any sizes (a pipeline of symbolic sizes runs
        any schedule tuned for it)."""
        def query(conn):
            if not self._writable:
                self._check_schema(conn)
            if any_size:
                cur = conn.execute(
                    "SELECT * FROM best WHERE algo_hash = ? AND dtypes = ? AND target = ? AND "
                    "machine = ? AND threads = ? AND action_version = ? AND beam >= ? "
                    "ORDER BY created DESC LIMIT 1",
                    (key.algo_hash, key.dtypes, key.target, key.machine, key.threads,
                     ACTION_VERSION, _sql_int(min_beam)))
            else:
                cur = conn.execute("SELECT * FROM best WHERE key = ? AND action_version = ?",
                                   (key.digest, ACTION_VERSION))
            return cur.fetchone(), [c[0] for c in cur.description]
        try:
            conn = self._connect(create=False)
            if conn is None:
                return None
            try:
                row, cols = query(conn)
            except sqlite3.OperationalError as e:
                if "readonly" not in str(e) and "unable to open" not in str(e):
                    raise
                try:
                    row, cols = query(self._read_only(immutable=False))
                except sqlite3.OperationalError:
                    row, cols = query(self._read_only(immutable=True))
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):    # created by a writer that wrote nothing yet
                return None
            warnings.warn(f"schedlang: the tuning database {self.path} cannot be read ({e}); "
                          "ignoring it", stacklevel=3)
            return None
        except (sqlite3.Error, TuningDatabaseError) as e:
            warnings.warn(f"schedlang: the tuning database {self.path} cannot be read ({e}); "
                          "ignoring it", stacklevel=3)
            return None
        if row is None:
            return None
        row = dict(zip(cols, row))
        if not _row_types_ok(row):
            warnings.warn(f"schedlang: the tuning database {self.path} holds a damaged entry "
                          f"for {key.describe()} (a field of the wrong type); ignoring it",
                          stacklevel=3)
            return None
        if (row.get("beam") or 0) < _sql_int(min_beam):
            return None
        return row

    def load_schedule(self, key, outputs, min_beam=0):
        """The stored best schedule of ``key`` replayed onto ``outputs`` (a list of Funcs), or
        None when there is none. A row whose JSON is damaged or whose schedule no longer
        replays is ignored with a warning. Example: ``db.load_schedule(key, [C])``."""
        row = self.best_row(key, min_beam)
        if row is None:
            return None
        return schedule_from_row(row, key, outputs, self.path)

    def store_best(self, key, schedule, time_s, beam, strategy="beam"):
        """Record ``schedule`` as the best for ``key`` (whose thread count it was tuned for)
        unless a stored one is both faster and from a wider search. Returns True when it
        was stored. Example: ``db.store_best(workload_key(C, threads=1), s, 1e-3, beam=4)``."""
        text = schedule.to_json()

        def fn(conn):
            old = conn.execute("SELECT time_s, beam FROM best WHERE key = ?",
                               (key.digest,)).fetchone()
            if old is not None and _number(old[0]) and _number(old[1]) and old[0] < time_s \
                    and old[1] > _sql_int(beam):
                return False
            conn.execute("INSERT OR REPLACE INTO best VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                         "?, ?)", (key.digest, key.algo_hash, key.sizes, key.dtypes, key.target,
                                   key.machine, ACTION_VERSION, json.dumps(key.names), text,
                                   float(time_s), _sql_int(beam), strategy, key.threads,
                                   time.time()))
            return True
        return self._write(fn)

    # ------------------------------------------------------------------ measurements
    def add_measurements(self, key, measurements):
        """Append ``Measurement``s of candidates of ``key`` (one transaction)."""
        now = time.time()
        rows = [(key.digest, key.machine, m.schedule_json, m.time_s, m.status, m.feature_version,
                 None if m.features is None else json.dumps([float(x) for x in m.features]), now)
                for m in measurements]
        if not rows:
            return
        self._write(lambda conn: conn.executemany(
            "INSERT INTO measurements (key, machine, schedule, time_s, status, feature_version, "
            "features, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows))

    def measurements(self, machine, feature_version, key=None, limit=20000):
        """Successful measurements taken on ``machine`` with features of ``feature_version``
        (of one problem when ``key`` is given), newest first. Rows whose features are not a
        list of numbers of one length are skipped with one warning."""
        try:
            conn = self._connect(create=False)
            if conn is None:
                return []
            sql = ("SELECT key, schedule, time_s, features FROM measurements WHERE machine = ? "
                   "AND feature_version = ? AND status = 'ok' AND time_s > 0")
            params = [machine, feature_version]
            if key is not None:
                sql += " AND key = ?"
                params.append(key.digest)
            sql += " ORDER BY id DESC LIMIT ?"
            params.append(limit)
            rows = conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return []
            warnings.warn(f"schedlang: the tuning database {self.path} cannot be read ({e}); "
                          "the cost model trains without it", stacklevel=2)
            return []
        except (sqlite3.Error, TuningDatabaseError) as e:
            warnings.warn(f"schedlang: the tuning database {self.path} cannot be read ({e}); "
                          "the cost model trains without it", stacklevel=2)
            return []
        out, bad, width = [], 0, None
        for k, sched, t, feats in rows:
            try:
                vec = json.loads(feats)
                if not isinstance(vec, list) or not all(isinstance(x, (int, float)) for x in vec):
                    raise ValueError("not a list of numbers")
                if width is None:
                    width = len(vec)
                if len(vec) != width:
                    raise ValueError("a feature vector of another length")
                out.append(Measurement(sched, float(t), "ok", vec, feature_version, k))
            except (ValueError, TypeError):
                bad += 1
        if bad:
            warnings.warn(f"schedlang: ignored {bad} measurement row(s) with damaged features in "
                          f"the tuning database {self.path}", stacklevel=2)
        return out

    def count_measurements(self, key=None):
        """How many measurement rows there are (of ``key``, when given). Example:
        ``db.count_measurements(key)``."""
        conn = self._connect(create=False)
        if conn is None:
            return 0
        if key is None:
            return conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        return conn.execute("SELECT COUNT(*) FROM measurements WHERE key = ?",
                            (key.digest,)).fetchone()[0]


def schedule_from_row(row, key, outputs, where="the tuning database"):
    """Replay a ``best`` row's schedule onto ``outputs``; None (with a warning) when the row
    is damaged or its schedule does not fit the algorithm any more.
    Example: ``schedule_from_row(db.best_row(key), key, [C])``."""
    try:
        # from_json renames what a rebuild named otherwise, from the names the text holds
        data = json.loads(row["schedule"])
        data["names"] = json.loads(row["names"])
        return Schedule.from_json(json.dumps(data), *outputs)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError,
            SchedlangError) as e:
        warnings.warn(f"schedlang: ignoring the tuned schedule stored in {where} for "
                      f"{', '.join(o.name for o in outputs)} ({key.describe()}): it cannot be "
                      f"replayed ({e}); it will be re-tuned or the default schedule used",
                      stacklevel=3)
        return None


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _row_types_ok(row):
    """Whether a ``best`` row's fields have the types this module writes (a hand-edited or
    damaged row must be ignored, not compared)."""
    return (isinstance(row.get("schedule"), str) and isinstance(row.get("names"), str)
            and (row.get("beam") is None or _number(row.get("beam")))
            and (row.get("time_s") is None or _number(row.get("time_s"))))


def _advice(e):
    """What to do about a database error ``e``: wait for a lock; else fix the place."""
    if "locked" in str(e).lower() or "busy" in str(e).lower():
        return ("another process holds its write lock; try again when that process is done, "
                "or set SCHEDLANG_CACHE to another directory")
    return "set SCHEDLANG_CACHE to a writable directory, or delete the file if it is damaged"


def _retry(fn):
    """Call ``fn``; retry while SQLite reports the database locked or busy (another process
    is in a write transaction beyond the busy timeout, or changing the journal mode), for
    about ``BUSY_TIMEOUT_S`` in all."""
    delay, deadline = 0.01, time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            msg = str(e).lower()
            if time.monotonic() > deadline or not ("locked" in msg or "busy" in msg):
                raise
            time.sleep(delay)
            delay = min(0.5, delay * 2)
