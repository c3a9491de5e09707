"""Benchmarks: timed runs that print and write tables (never timed tests)."""
