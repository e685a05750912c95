"""The runner: a study's methods x datasets x folds x seeds through ULTRA's main.py (``ultra-multr-run``).

:mod:`.cli` (the command line and the plan), :mod:`.runs` (run folders, commands, done / pending / stale),
:mod:`.lock` (one runner per output folder), :mod:`.processes` (the steps' process groups),
:mod:`.execute` (one run; a step's stderr through :mod:`.stderr_copy`), :mod:`.executors` (local pool or
submitit: SLURM, submitit-local, debug), :mod:`.job_exit` (how a submitit-local job's process ended),
:mod:`.slurm_config` (the SLURM job array's resources) and :mod:`.seeded_main` (main.py under a fixed seed, what
each step runs).
"""
