"""Experiment tooling: metrics, significance test, TREC files, evaluation, runner, tables.

Modules (import them directly; none is imported here, so that the pure-numpy
ones stay usable without torch or ULTRA):

* :mod:`.metrics` -- per-query nDCG@k / ERR@k with ULTRA's conventions
* :mod:`.significance` -- paired Fisher randomisation test
* :mod:`.trec` -- TREC run and qrels writers
* :mod:`.evaluate` -- evaluate a checkpoint saved by ULTRA's main.py
* :mod:`.methods` -- the method registry (name -> ULTRA settings)
* :mod:`.runner` -- run a config of methods x datasets x folds x seeds (CLI ``ultra-multr-run``), with
  :mod:`.study_config` (the config), :mod:`.runs` (run folders, commands, done / pending / stale),
  :mod:`.lock` (one runner per output folder), :mod:`.processes` (the steps' process groups) and
  :mod:`.execute` (one run; a step's stderr through :mod:`.stderr_copy`), :mod:`.executors` (local pool or
  submitit: SLURM, submitit-local, debug) and :mod:`.slurm_config` (the SLURM job array's resources)
* :mod:`.aggregate` -- Table 2 style tables, significance markers, Figure 3
* :mod:`.fold_study` -- the runner config of the studies on folds (MQ2008, generated sets)
* :mod:`.row_tables` -- rows of dicts as CSV and Markdown
* :mod:`.step_inputs` -- the random batch and settings of the step benchmarks
"""
