"""The simulator: Kueue's scheduler performance scenarios driven through the real event-sourced pipeline.

A scenario (Kueue's ``generator.yaml`` format, see :mod:`kueue_es.simulator.config`) is expanded into the
objects and workload arrivals Kueue's performance runner would create (:mod:`kueue_es.simulator.model`); a
simulated clock and simulated jobs (:mod:`kueue_es.simulator.sim`) then feed the log, the projection folds it
and the scheduler decides, through the same engine the service uses (:mod:`kueue_es.engine`).
"""
