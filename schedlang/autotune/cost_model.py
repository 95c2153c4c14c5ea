"""The cost model: ridge regression of log run time on loop-IR features, with numpy only.

The search only needs the model to *rank* candidates of one problem, so it is fitted on
differences within a problem: features and log times are centred per tuning problem
(workload key) before the fit, which removes everything the problem itself sets (its
size, its flops) and leaves what the schedule changes. ``rank_correlation`` reports how
well it ranks: the Spearman correlation between predicted and measured times on
measurements held out from training, averaged over problems. Before any measurement
exists, ``prior_scores`` ranks by a hand-written estimate (fewer executed stores, more
vector lanes, more cores, fewer guards and scalar loads are better).
Example::

    model = CostModel().fit(features, times, groups)
    order = np.argsort(model.predict(candidate_features))   # fastest predicted first
    rho, n = rank_correlation(features, times, groups)
"""
from __future__ import annotations

import os

import numpy as np

from .features import FEATURE_NAMES, FEATURE_VERSION

DEFAULT_ALPHA = 10.0


class CostModel:
    """Ridge regression on standardized, per-problem centred features (see module docstring).
    ``predict`` returns a score that orders candidates of one problem like their log times."""

    version = FEATURE_VERSION

    def __init__(self, alpha=DEFAULT_ALPHA):
        self.alpha = float(alpha)
        self.weights = None
        self.scale = None
        self.samples = 0

    @property
    def trained(self):
        return self.weights is not None

    def fit(self, features, times, groups=None, sample_weights=None):
        """Fit on feature rows, run times in seconds, (optionally) the problem each row
        belongs to and a weight per row; returns self. Needs at least 3 rows."""
        X = np.asarray(features, dtype=np.float64)
        y = np.log(np.maximum(np.asarray(times, dtype=np.float64), 1e-9))
        if X.ndim != 2 or len(X) != len(y) or len(X) < 3:
            self.weights = None
            return self
        groups = np.zeros(len(y), dtype=np.int64) if groups is None else _group_ids(groups)
        w = np.ones(len(y)) if sample_weights is None else np.asarray(sample_weights, float)
        Xc, yc = X.copy(), y.copy()
        for g in np.unique(groups):
            m = groups == g
            Xc[m] -= np.average(Xc[m], axis=0, weights=w[m])
            yc[m] -= np.average(yc[m], weights=w[m])
        scale = np.sqrt(np.average(Xc ** 2, axis=0, weights=w))
        scale[scale < 1e-9] = 1.0
        root = np.sqrt(w)
        Z = Xc / scale * root[:, None]
        A = Z.T @ Z + self.alpha * np.eye(Z.shape[1])
        self.weights = np.linalg.solve(A, Z.T @ (yc * root))
        self.scale = scale
        self.samples = len(y)
        return self

    def predict(self, features):
        """A score per feature row: lower means faster (log-time units, up to a per-problem
        offset). An untrained model falls back to ``prior_scores``."""
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or not len(X):
            return np.zeros(len(X))
        if not self.trained or X.shape[1] != len(self.weights):
            return prior_scores(X)
        return (X / self.scale) @ self.weights


def _group_ids(groups):
    index = {}
    return np.array([index.setdefault(g, len(index)) for g in groups], dtype=np.int64)


def prior_scores(features, threads=None):
    """A hand-written log-time estimate used before the model has data: executed stores and
    scalar loads (what vectorization and register tiling remove), guards, minus the cores a
    parallel loop can use. Example: ``prior_scores(X).argsort()[:4]``."""
    X = np.asarray(features, dtype=np.float64)
    col = {n: i for i, n in enumerate(FEATURE_NAMES)}
    cores = np.log2(threads or os.cpu_count() or 1)
    return (X[:, col["log_stores_executed"]] + 0.5 * X[:, col["log_scalar_load_elements"]]
            + 0.3 * X[:, col["log_guards_executed"]]
            - cores * X[:, col["parallel_core_share"]])


def _ranks(a):
    """Ranks of ``a`` (0-based), ties sharing their mean rank."""
    a = np.asarray(a, dtype=np.float64)
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(len(a), dtype=np.float64)
    sorted_a = a[order]
    start = 0
    for k in range(1, len(a) + 1):
        if k == len(a) or sorted_a[k] != sorted_a[start]:
            ranks[order[start:k]] = (start + k - 1) / 2.0
            start = k
    return ranks


def spearman(a, b):
    """Spearman rank correlation of two equal-length sequences (nan when either is constant
    or shorter than 2). Example: ``spearman([1, 2, 3], [10, 20, 25])`` is 1.0 (to rounding)."""
    if len(a) != len(b) or len(a) < 2:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    sa, sb = ra.std(), rb.std()
    if sa == 0 or sb == 0:
        return float("nan")
    return float(((ra - ra.mean()) * (rb - rb.mean())).mean() / (sa * sb))


def rank_correlation(features, times, groups=None, held_out=0.3, seed=0, alpha=DEFAULT_ALPHA):
    """``(rho, n_test)``: train on a random ``1 - held_out`` of each problem's measurements,
    predict the rest, and average the per-problem Spearman correlation between predicted
    scores and measured times (weighted by held-out count; problems with fewer than 3
    held-out rows are skipped). Example: ``rank_correlation(X, t, keys)``."""
    X = np.asarray(features, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    groups = np.zeros(len(t), dtype=np.int64) if groups is None else _group_ids(groups)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(t), dtype=bool)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        n_test = int(round(held_out * len(idx)))
        if n_test >= 3 and len(idx) - n_test >= 3:
            test[rng.choice(idx, n_test, replace=False)] = True
    if not test.any():
        return float("nan"), 0
    model = CostModel(alpha).fit(X[~test], t[~test], groups[~test])
    pred = model.predict(X[test])
    total, weight = 0.0, 0
    for g in np.unique(groups[test]):
        m = groups[test] == g
        rho = spearman(pred[m], t[test][m])
        if not np.isnan(rho):
            total += rho * m.sum()
            weight += int(m.sum())
    return (total / weight if weight else float("nan")), weight


# Rows of the problem being tuned weigh this much more than rows of other problems: what
# a schedule change does depends on the problem, so its own measurements rank best.
FOCUS_WEIGHT = 5.0


def train_from_measurements(measurements, alpha=DEFAULT_ALPHA, focus_key=None):
    """A CostModel fitted on database ``Measurement`` rows (features, time, key); rows of
    problem ``focus_key`` (a key digest) weigh FOCUS_WEIGHT times more.
    Example: ``train_from_measurements(db.measurements(key.machine, FEATURE_VERSION))``."""
    rows = [m for m in measurements if m.features is not None and m.time_s]
    if not rows:
        return CostModel(alpha)
    width = len(FEATURE_NAMES)
    rows = [m for m in rows if len(m.features) == width]
    return CostModel(alpha).fit([m.features for m in rows], [m.time_s for m in rows],
                                [m.key for m in rows],
                                [FOCUS_WEIGHT if m.key == focus_key else 1.0 for m in rows])


__all__ = ["CostModel", "spearman", "rank_correlation", "prior_scores",
           "train_from_measurements"]
