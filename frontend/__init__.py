"""Tensor frontend: lazy Tensors whose ops lower to schedlang algorithm Funcs (SPEC §5)."""
