"""A hydra launcher that runs the jobs of a ``marl-run -m`` sweep as Ray tasks.

Select it with ``hydra/launcher=marl_ray``; it ships with ``marl`` (hydra finds
launchers in the ``hydra_plugins`` namespace package). See
:mod:`hydra_plugins.marl_ray_launcher.ray_launcher`.
"""
