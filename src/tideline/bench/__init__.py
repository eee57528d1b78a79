"""Benchmarks: ``python -m tideline.bench NAME [options]`` (recall, real, calibrate, …)."""
