"""Shared fixtures. Nothing here reads ../shared: tests make their own data."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import List

import pytest
import torch

from ultra_multr import tensorboard
from ultra_multr.data.synthetic import write_synthetic_ultra_dataset

# Test tensors are small: one intra-op thread avoids OpenMP hand-offs that cost
# more than the work (and keeps the suite fast when the machine is busy).
torch.set_num_threads(1)

@pytest.fixture(autouse=True)
def _no_tensorboard_writer_across_tests():
    """The TensorBoard writer is one per process: a test that opens it (through
    main.py's args) must not leave it to the next."""
    yield
    tensorboard.close()


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_ultra_main() -> str:
    """Path of ULTRA's main.py: $ULTRA_MAIN, else beside the ``ultra`` package.

    Skips the calling test when ULTRA is not importable or main.py is absent
    (main.py is not part of ULTRA's installed package, only of a checkout).
    """
    ultra = pytest.importorskip("ultra", reason="ULTRA_pytorch is not importable")
    path = os.environ.get("ULTRA_MAIN") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "main.py"
    )
    if not os.path.isfile(path):
        pytest.skip("ULTRA's main.py not found at %s (set ULTRA_MAIN)" % path)
    return path


@pytest.fixture(
    params=[
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
        ),
    ]
)
def device(request) -> str:
    """Every device a test should pass on: "cpu" always, "cuda" where there is one.

    Pass it to our algorithms as the ``device=`` hparam; on a CUDA machine the
    "cpu" case also checks that a CPU model meets ULTRA's CUDA metrics.
    """
    return request.param


@pytest.fixture(scope="session")
def ultra_main() -> str:
    return find_ultra_main()


@pytest.fixture(scope="session")
def synthetic_data_dir(tmp_path_factory) -> str:
    """A small ULTRA data directory: 60/12/12 queries, 6-15 docs, 20 features, labels 0-4."""
    return write_synthetic_ultra_dataset(str(tmp_path_factory.mktemp("synthetic")))


def run_ultra_main(main_py: str, args: List[str], cwd: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ULTRA's unmodified main.py in a subprocess; fail with its output on error."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    completed = subprocess.run(
        [sys.executable, main_py] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if completed.returncode != 0:
        raise AssertionError(
            "main.py %s failed (exit %d):\n%s\n%s"
            % (" ".join(args), completed.returncode, completed.stdout[-3000:], completed.stderr[-3000:])
        )
    return completed
