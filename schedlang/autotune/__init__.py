"""Autotuning (SPEC §4): the search over schedules, the cost model and the tuning database."""
