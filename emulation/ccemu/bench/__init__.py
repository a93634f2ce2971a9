"""Benchmarks a user runs to learn what their machine can emulate (`ccemu bench ...`)."""
