"""The suite's two tiers, checked: a test that starts a process (ULTRA's main.py, a script, the runner's steps, a
second interpreter) is marked ``slow``, and ``python -m pytest -m "not slow" tests`` is the fast loop.

While a test without the marker runs, its fixtures included (a module-scoped fixture that starts main.py counts
for the first test that asks for it), every way of starting a process fails: :mod:`subprocess` (and with it
``os.popen``, ``asyncio``'s subprocesses, multiprocessing's spawn and forkserver), ``os.fork`` (multiprocessing's
fork, ``os.spawn*``), ``os.forkpty``, ``os.posix_spawn[p]`` and ``os.system``.  The test fails naming the marker,
even where the code under test catches the error.  ``tests/conftest.py`` installs the hooks and, before any test,
calls :func:`build_library_caches`.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Iterator, List, Tuple

import pytest

MARKER = "slow"

#: (owner, attribute, name in the message) through which Python starts a process; those a platform lacks are
#: skipped.  Popen._execute_child is the one path of subprocess.Popen (it binds fork_exec at import).
_STARTERS: List[Tuple[object, str, str]] = [(subprocess.Popen, "_execute_child", "subprocess.Popen")] + [
    (os, name, "os." + name) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")]
for _module_name, _name in (("_posixsubprocess", "fork_exec"), ("_winapi", "CreateProcess")):
    try:
        _STARTERS.append((__import__(_module_name), _name, "%s.%s" % (_module_name, _name)))
    except ImportError:
        pass

#: A test's messages of refused process starts, not yet reported (a test of the guard may clear them).
FOUND = pytest.StashKey[List[str]]()


def build_library_caches() -> None:
    """Build, outside every test, the caches that a library fills once per machine by starting a process.

    matplotlib lists the system fonts with ``fc-list`` the first time it is imported on a machine (no font cache in
    its config dir yet); found on a fresh GPU machine, where every test drawing a figure failed the guard.  Importing
    its font manager here builds the cache before the guard is on; where matplotlib is not installed, nothing to do.
    """
    try:
        import matplotlib.font_manager  # noqa: F401
    except ImportError:
        pass


class UnmarkedProcessError(RuntimeError):
    """A test without the ``slow`` marker started a process."""


def message(test: str, starter: str) -> str:
    return ("%s starts a process (%s) but is not marked %r: mark it @pytest.mark.%s (or the module "
            "`pytestmark = pytest.mark.%s`), so that `-m \"not %s\"` stays the fast tier (tests/process_guard.py)"
            % (test, starter, MARKER, MARKER, MARKER, MARKER))


@contextlib.contextmanager
def processes_refused(test: str, found: List[str]) -> Iterator[None]:
    """Within the block every process start raises :class:`UnmarkedProcessError` and is appended to ``found``."""
    saved = [(owner, name, label, getattr(owner, name)) for owner, name, label in _STARTERS if hasattr(owner, name)]

    def refuser(starter: str):
        def refuse(*args, **kwargs):
            found.append(message(test, starter))
            raise UnmarkedProcessError(found[-1])
        return refuse

    for owner, name, label, _ in saved:
        setattr(owner, name, refuser(label))
    try:
        yield
    finally:
        for owner, name, _, original in saved:
            setattr(owner, name, original)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Around a test's setup, call and teardown: processes refused unless it is marked."""
    if item.get_closest_marker(MARKER):
        yield
        return
    item.stash[FOUND] = []
    with processes_refused(item.nodeid, item.stash[FOUND]):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A phase that started a process fails, even if the code under test swallowed the error."""
    outcome = yield
    report = outcome.get_result()
    found = item.stash.get(FOUND, None)
    if found and report.outcome != "failed":
        report.outcome = "failed"
        report.longrepr = "\n".join(found)
    if found:
        del found[:]  # reported once, in the phase that started it
