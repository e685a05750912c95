"""Shared fixtures. Nothing here reads ../shared: tests make their own data."""
from __future__ import annotations

import atexit
import collections
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
from typing import List, Sequence

import pytest
import torch

from ultra_multr import tensorboard
from ultra_multr.compat.early_checks import EARLY_CHECKS_ENV

# The `slow` marker is checked: a test without it that starts a process fails (tests/process_guard.py).
from process_guard import build_library_caches, pytest_runtest_makereport, pytest_runtest_protocol  # noqa: F401

build_library_caches()

# Results of passed data checks (ultra_multr.data.check_cache) go to a directory of this session, not ~/.cache;
# main.py subprocesses inherit it.
os.environ.setdefault("ULTRA_MULTR_CACHE", tempfile.mkdtemp(prefix="ultra_multr-cache-"))
# main.py subprocesses start no early data checks (ultra_multr.compat.startup): on the suite's small data a second
# process only costs CPU (a Python and numpy start per main.py run). The tests of them ask for `early_checks`.
os.environ.setdefault(EARLY_CHECKS_ENV, "0")
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

# Test tensors are small: one intra-op thread avoids OpenMP hand-offs that cost
# more than the work (and keeps the suite fast when the machine is busy).
torch.set_num_threads(1)

def pytest_collection_modifyitems(items) -> None:
    """Tests that start processes first (in their order): under ``-n 2`` the long ones then run beside the short ones
    instead of last, one worker waiting for the other (the suite's wall time is part of CI's budget)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _no_tensorboard_writer_across_tests():
    """The TensorBoard writer is one per process: a test that opens it (through
    main.py's args) must not leave it to the next."""
    yield
    tensorboard.close()


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL_HINT = "install it with `bash example/install.sh --test` (see README)"


def missing(reason: str) -> None:
    """A test needs something that is not installed: skip it, but fail under CI=true.

    CI must prove the plugin works with ULTRA, so there nothing skips for a
    missing dependency (only the CUDA cases skip on a machine without a GPU).
    Works at module level (a whole test file) and inside a test.
    """
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("%s; %s" % (reason, INSTALL_HINT), pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_ultra():
    """The ``ultra`` package; a test file that needs ULTRA calls this before importing our ULTRA-facing modules."""
    try:
        import ultra
    except ImportError as error:
        missing("ULTRA_pytorch is not importable (%s)" % error)
    return ultra


def require(module: str):
    """An optional dependency (pyarrow, submitit, ...): imported, or skipped/failed as :func:`missing` says."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing("%s is not importable (%s)" % (module, error))


def find_ultra_main() -> str:
    """Path of ULTRA's main.py: $ULTRA_MAIN, else beside the ``ultra`` package.

    main.py is not part of ULTRA's installed package, only of a checkout:
    example/install.sh installs ULTRA editable so that it stays beside it.
    """
    ultra = require_ultra()
    path = os.environ.get("ULTRA_MAIN") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "main.py"
    )
    if not os.path.isfile(path):
        missing("ULTRA's main.py not found at %s (set ULTRA_MAIN)" % path)
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


@pytest.fixture()
def early_checks(monkeypatch) -> None:
    """main.py runs (and the start-up hook's functions) start early data checks, as by default outside the suite."""
    monkeypatch.delenv("ULTRA_MULTR_EARLY_CHECKS", raising=False)


@pytest.fixture()
def fresh_ledger():
    """The run's session ledger (:data:`ultra_multr.session_budget.LEDGER`, one per process) empty before and after
    the test: tests that build algorithms in-process would otherwise see each other's sessions and decisions."""
    from ultra_multr.session_budget import LEDGER  # needs ULTRA: imported only by the tests that ask

    LEDGER.reset()
    yield
    LEDGER.reset()


@pytest.fixture(scope="session")
def ultra_main() -> str:
    return find_ultra_main()


@pytest.fixture(scope="session")
def synthetic_data_dir(tmp_path_factory) -> str:
    """A small ULTRA data directory: 60/12/12 queries, 6-15 docs, 20 features, labels 0-4."""
    return write_synthetic_ultra_dataset(str(tmp_path_factory.mktemp("synthetic")))


def write_toy_study(directory) -> dict:
    """A small ULTRA data directory ``directory/data`` (16/6/8 queries, 8 features, labels 0-4) and a
    position-based click model ``directory/click.json``; returns the study config's ``settings`` and
    ``main_args`` for a 4-step run on them (ranker of one hidden layer of 8, batches of 8)."""
    write_synthetic_ultra_dataset(os.path.join(str(directory), "data"), {"train": 16, "valid": 6, "test": 8},
                                  n_features=8)
    with open(os.path.join(str(directory), "click.json"), "w") as handle:
        json.dump({"model_name": "position_biased_model", "eta": 1.0, "click_prob": [0.1, 0.3, 0.5, 0.7, 1.0],
                   "exam_prob": [1.0 / (i + 1) for i in range(15)]}, handle)
    return {
        "settings": {"train_input_hparams": {"click_model_json": "click.json"},
                     "ranking_model_hparams": {"hidden_layer_sizes": [8]}},
        "main_args": {"batch_size": 8, "max_train_iteration": 4, "steps_per_checkpoint": 2},
    }


def main_py_in_process(main_py: str, args: List[str], monkeypatch) -> BaseException:
    """What ULTRA's main.py, run with ``args`` in this process as the runner's seeded_main runs it (runpy, as
    ``__main__``), raised (fails if it raised nothing): for refusals that come before any training, without the
    cost of a process."""
    from ultra_multr.compat import main_py_start  # needs ULTRA: imported only by the tests that ask

    monkeypatch.setattr(sys, "argv", [main_py] + list(args))
    monkeypatch.setattr(sys, "path", [os.path.dirname(main_py)] + sys.path)
    monkeypatch.setattr(main_py_start, "_STARTED", False)  # once per process: each run here is a new main.py
    monkeypatch.setattr(torch, "save", torch.save)  # the atomic save main.py's start installs stays with the test
    with pytest.raises(Exception) as raised:
        runpy.run_path(main_py, run_name="__main__")
    return raised.value


class _MainPyZygote:
    """tests/main_py_zygote.py for one main.py and one environment (:func:`_zygote` keeps them)."""

    def __init__(self, main_py: str, env: dict) -> None:
        self.main_py = main_py
        self.process = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "main_py_zygote.py"),
                                         main_py], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, args: List[str], cwd: str, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="main_py-") as folder:
            out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
            request = {"args": list(args), "cwd": cwd, "stdout": out, "stderr": err}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = json.loads(self.process.stdout.readline())["pid"]
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                self.process.stdout.readline()
                raise subprocess.TimeoutExpired([self.main_py] + list(args), timeout)
            returncode = json.loads(self.process.stdout.readline())["returncode"]
            with open(out, errors="replace") as o, open(err, errors="replace") as e:
                return subprocess.CompletedProcess([sys.executable, self.main_py] + list(args), returncode, o.read(),
                                                   e.read())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


#: zygotes by (main.py, environment but pytest's name of the current test), the most recently used last; a library
#: that sets a variable at its first use, or a test that changes one, gets a zygote of its own
_ZYGOTES: "collections.OrderedDict" = collections.OrderedDict()
#: zygotes kept per test worker (each holds torch in memory)
_MAX_ZYGOTES = 2


def _zygote(main_py: str, env: dict) -> _MainPyZygote:
    key = (main_py, frozenset((k, v) for k, v in env.items() if k != "PYTEST_CURRENT_TEST"))
    zygote = _ZYGOTES.pop(key, None)
    if zygote is None or zygote.process.poll() is not None:
        zygote = _MainPyZygote(main_py, env)
    _ZYGOTES[key] = zygote
    while len(_ZYGOTES) > _MAX_ZYGOTES:
        _ZYGOTES.popitem(last=False)[1].close()
    return zygote


@atexit.register
def _close_zygotes() -> None:
    for zygote in _ZYGOTES.values():
        zygote.close()


def run_ultra_main(
    main_py: str, args: List[str], cwd: str, timeout: float = 240, check: bool = True, wrapper: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    """Run ULTRA's unmodified main.py in a process of its own; fail with its output on error (``check``).

    ``wrapper``: a command that runs the rest of the command line (e.g. in a namespace with a small disk).
    Without one, and with the start-up hook's early checks off (the suite's default), the process is forked from
    a Python that has already imported torch, TensorBoard and ULTRA (tests/main_py_zygote.py: it saves about 3 s a
    run); else it is a new interpreter.
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # the start-up hook's early data checks start with the interpreter, before main.py's first line: a zygote's
    # interpreter started before the run's arguments existed
    if not wrapper and env.get(EARLY_CHECKS_ENV) == "0":
        completed = _zygote(main_py, env).run(args, cwd, timeout)
    else:
        completed = subprocess.run(
            list(wrapper) + [sys.executable, main_py] + args, cwd=cwd, env=env, capture_output=True, text=True,
            timeout=timeout,
        )
    if check and completed.returncode != 0:
        raise AssertionError(
            "main.py %s failed (exit %d):\n%s\n%s"
            % (" ".join(args), completed.returncode, completed.stdout[-3000:], completed.stderr[-3000:])
        )
    return completed
