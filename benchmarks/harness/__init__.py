"""The benchmark harness behind ``benchmarks/run.py`` (its docstring says what it does).

Imported with ``benchmarks/`` on ``sys.path`` (as ``run.py`` and the other benchmark scripts do),
so its modules reach ``benchmarks/v2.py`` as ``v2``."""
