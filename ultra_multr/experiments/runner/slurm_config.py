"""The ``"slurm"`` section of a study config: the resources of the study's job array, and its sbatch script.

Keys (all optional; see docs/cluster.md)::

    "slurm": {"partition": "cpu", "time_min": 120, "cpus_per_task": 4, "gpus_per_node": 0, "mem_gb": 16,
              "array_parallelism": 32, "account": "my-project", "qos": null, "constraint": null, "exclude": null,
              "job_name": "ultra-multr", "setup": ["module load python/3.11"],
              "additional_parameters": {"mail-type": "FAIL"}}

``additional_parameters`` become ``#SBATCH --<name>=<value>`` lines as given
(underscores in names are turned into dashes by submitit); ``setup`` lines run
in the batch script before the job starts.  Nothing here imports submitit
except :func:`sbatch_script`.
"""
from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ultra_multr.config import require


@dataclass(frozen=True)
class SlurmConfig:
    """Resources of each array task (one run), and of the array as a whole."""

    partition: Optional[str] = None
    #: wall-clock limit of one run, in minutes
    time_min: int = 60
    #: also the OMP/MKL/OpenBLAS threads of each run unless --threads is given
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    mem_gb: Optional[float] = None
    #: runs of the array that may run at once (``--array=0-N%<this>``)
    array_parallelism: int = 256
    account: Optional[str] = None
    qos: Optional[str] = None
    constraint: Optional[str] = None
    exclude: Optional[str] = None
    job_name: str = "ultra-multr"
    setup: Tuple[str, ...] = ()
    additional_parameters: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(self.time_min >= 1, "time_min must be >= 1, got %d" % self.time_min)
        require(self.cpus_per_task >= 1, "cpus_per_task must be >= 1, got %d" % self.cpus_per_task)
        require(self.gpus_per_node >= 0, "gpus_per_node must be >= 0, got %d" % self.gpus_per_node)
        require(self.mem_gb is None or self.mem_gb > 0, "mem_gb must be > 0, got %s" % self.mem_gb)
        require(self.array_parallelism >= 1, "array_parallelism must be >= 1, got %d" % self.array_parallelism)


def submitit_parameters(slurm: SlurmConfig) -> Dict[str, Any]:
    """``SlurmExecutor.update_parameters`` keywords for ``slurm`` (unset options left out)."""
    mem = None
    if slurm.mem_gb is not None:
        mem = "%dGB" % slurm.mem_gb if slurm.mem_gb == int(slurm.mem_gb) else "%dMB" % round(slurm.mem_gb * 1024)
    parameters = {
        "job_name": slurm.job_name,
        "partition": slurm.partition,
        "time": slurm.time_min,
        "cpus_per_task": slurm.cpus_per_task,
        "gpus_per_node": slurm.gpus_per_node or None,
        "mem": mem,
        "array_parallelism": slurm.array_parallelism,
        "account": slurm.account,
        "qos": slurm.qos,
        "constraint": slurm.constraint,
        "exclude": slurm.exclude,
        "setup": list(slurm.setup) or None,
        "additional_parameters": dict(slurm.additional_parameters) or None,
    }
    return {name: value for name, value in parameters.items() if value is not None}


def sbatch_script(slurm: SlurmConfig, folder: str, n_runs: int) -> str:
    """The batch script submitit's SlurmExecutor submits for a job array of ``n_runs`` runs (for --dry-run)."""
    from submitit.slurm.slurm import _make_sbatch_string  # what SlurmExecutor._make_submission_file_text calls

    command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(folder)])
    map_count = n_runs if n_runs > 1 else None  # one run is submitted as a plain job, not an array
    return _make_sbatch_string(command=command, folder=folder, map_count=map_count, **submitit_parameters(slurm))
