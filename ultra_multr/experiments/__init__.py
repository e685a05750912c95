"""Experiment tooling: the runner, evaluation, significance, the tables, and the studies' shared parts.

Modules (import them directly; none is imported here, so that the pure-numpy ones stay usable without torch or
ULTRA): :mod:`.runner` (a config of methods x datasets x folds x seeds through main.py, CLI ``ultra-multr-run``),
:mod:`.study_config` and :mod:`.methods` (the config and the method registry), :mod:`.evaluate` (a checkpoint
saved by main.py, evaluated), :mod:`.trec`, :mod:`.significance` (paired Fisher randomisation test), the tables
(:mod:`.aggregate`, :mod:`.compare`, :mod:`.budget`, :mod:`.diagnostics`, :mod:`.row_tables`), the simulator's
reports (:mod:`.simulator_report`, :mod:`.simulator_validity`), :mod:`.estimator_targets`, and what several
studies share (:mod:`.fold_study`, :mod:`.step_inputs`).
"""
