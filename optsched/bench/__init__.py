"""Benchmarking: run methods over instance sets, keep a tidy results table, summarise and plot."""

from optsched.bench.runner import COLUMNS, BenchTask, run_bench
from optsched.bench.summary import summarise

__all__ = ["COLUMNS", "BenchTask", "run_bench", "summarise"]
