"""Benchmark workloads and timing for ``schedlang bench`` (installed as ``schedlang.bench``)."""
