"""Settings for the whole suite: bench rows are timed for a short budget each (the
tests check rows, columns and ratios' presence, not their precision), so the many
``schedlang bench`` runs of the CLI tests stay quick. Child processes inherit it."""
import os

os.environ.setdefault("SCHEDLANG_BENCH_BUDGET_S", "0.05")
