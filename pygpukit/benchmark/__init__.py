"""Benchmark support: a device clock for pytest-benchmark and helpers shared by the suites."""
