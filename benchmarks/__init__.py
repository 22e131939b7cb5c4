"""Speed benchmarks (``python -m benchmarks.speed``) and learning-benchmark suites (``suites/``)."""
