"""Benchmarks: `make bench` or `python -m bench [MODULE…] [--backend sqlite|postgres|all]`.

Every public module in this package (a name without a leading underscore) is a benchmark with a
`run() -> list[dict]` function. The runner (`__main__.py`) starts one subprocess per
(benchmark, backend) on a fresh throwaway database; the subprocess (`_worker.py`) sets Django
up, migrates, calls `run()` and hands the result rows back as one JSON line. A result row has a
`benchmark` name and any of `rows`, `seconds`, `rows_per_s`, `median_ms`, `p95_ms`, `queries`,
`notes`.
"""
