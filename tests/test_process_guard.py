"""tests/process_guard.py: a test without the ``slow`` marker cannot start a process, and fails if it tries."""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT
from process_guard import FOUND, UnmarkedProcessError

REFUSED = r"test_process_guard.py::%s starts a process \(%s\) but is not marked 'slow'"


def test_an_unmarked_test_cannot_start_a_process_by_any_route(request):
    name = request.node.name
    with pytest.raises(UnmarkedProcessError, match=REFUSED % (name, "subprocess.Popen")):
        subprocess.run([sys.executable, "-c", "pass"])
    with pytest.raises(UnmarkedProcessError, match=REFUSED % (name, "os.system")):
        os.system("true")
    with pytest.raises(UnmarkedProcessError, match=REFUSED % (name, "_posixsubprocess.fork_exec")):
        multiprocessing.get_context("spawn").Process(target=int).start()
    with pytest.raises(UnmarkedProcessError, match=REFUSED % (name, "os.fork")):
        multiprocessing.get_context("fork").Process(target=int).start()
    try:
        pid = os.fork()
    except UnmarkedProcessError:
        pass
    else:  # the guard let it through: the child leaves at once, the test fails
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        pytest.fail("os.fork was not refused")
    assert len(request.node.stash[FOUND]) == 5
    del request.node.stash[FOUND][:]  # each would fail this test: they were wanted here


SUITE = r'''
import subprocess, sys
import pytest

def test_unmarked():
    subprocess.run([sys.executable, "-c", "pass"])

def test_unmarked_and_swallowed():
    try:
        subprocess.run([sys.executable, "-c", "pass"])
    except Exception:
        pass

@pytest.fixture(scope="module")
def started():
    return subprocess.run([sys.executable, "-c", "print('up')"], capture_output=True, text=True).stdout

def test_unmarked_through_a_fixture(started):
    pass

@pytest.mark.slow
def test_marked():
    assert subprocess.run([sys.executable, "-c", "print('up')"], capture_output=True, text=True).stdout == "up\n"
'''


@pytest.mark.slow
def test_a_suite_fails_each_unmarked_test_that_starts_a_process(tmp_path):
    (tmp_path / "conftest.py").write_text("from process_guard import pytest_runtest_makereport, "
                                          "pytest_runtest_protocol  # noqa: F401\n")
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO_ROOT, "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-W", "ignore::pytest.PytestUnknownMarkWarning", str(tmp_path)], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120,
    )
    out = completed.stdout
    assert "2 failed, 1 passed, 1 error" in out, out[-3000:]  # the fixture's test errs at its setup
    for test in ("test_unmarked", "test_unmarked_and_swallowed", "test_unmarked_through_a_fixture"):
        assert "test_suite.py::%s starts a process (subprocess.Popen) but is not marked 'slow'" % test in out, out
