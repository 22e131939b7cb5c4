"""Every speed benchmark in one run: ``python -m benchmarks.speed [--quick] [--only A,B]``.

Each benchmark module exposes ``run(quick: bool) -> list[dict]``; a row holds
``name`` (the metric), ``value``, ``unit``, ``baseline_name`` and
``baseline_value`` (the reference measured in the same run, or ``None``),
``higher_is_better`` and optionally ``ratio``. The harness adds ``benchmark``
and, where missing, ``ratio``: the speed of marl relative to the baseline, so
``ratio > 1`` always means marl is faster (throughputs: marl / baseline; times:
baseline / marl).
"""
