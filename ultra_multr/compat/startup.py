"""Interpreter-start hook that lets ULTRA_pytorch import without TensorFlow.

ULTRA at commit 1757587 has ``import tensorflow as tf`` at the top of
``ultra/ranking_model/base_ranking_model.py`` and never uses it, so ``import
ultra`` (and therefore ULTRA's unmodified ``main.py``) fails on any machine
without TensorFlow.  This module is run from ``ultra_multr_startup.pth`` (see
setup.py), before ``main.py`` executes its first line, and installs a
meta-path finder that watches for the import of the top-level ``ultra``
package.  While -- and only while -- ``ultra`` executes, an empty placeholder
module stands in for ``tensorflow`` if the real one is not installed.  The
placeholder is removed as soon as ``ultra`` has finished importing, because
tensorboard (which ``main.py`` uses) probes for TensorFlow and breaks if it
finds an empty module.

It also chains an exception hook that adds one line to the traceback of two
failures of ULTRA's ``main.py`` that happen before any of our code runs, so
that the line names the culprit (both only when ``__main__`` is main.py, i.e.
has its parsed ``args``):

- an exception raised while ULTRA reads a split (``Raw_data``): the hook runs
  :mod:`ultra_multr.data.checks` on that split, which names the file and line
  or says the split has no query ULTRA keeps ("No valid query has been found.");
- a ``json.JSONDecodeError`` outside the reader: main.py's
  ``json.load(open(args.setting_file))``; the hook names the settings file;
- an exception in the ``torch.save`` main.py calls on the ranker checkpoint
  (on a full disk torch's C++ writer says "basic_ios::clear: iostream
  error" or "unexpected pos", naming neither file nor cause): the hook names
  the checkpoint and the free space of its file system ("the disk is full"
  below 1 MiB).

When the script is ULTRA's main.py, it also starts our data checks of the
splits main.py will read in a second process (:func:`start_early_checks`):
main.py builds our algorithm, which checks the data
(:func:`ultra_multr.data.checks.check_main_py_data`), only after ULTRA has
read every split in one thread, and on new data the checks cost about as much
again.  Started here, they run on a second core while ULTRA imports and
reads; the second process records each split that passes in the check cache
(:mod:`ultra_multr.data.check_cache`), and our algorithm waits for it
(:func:`wait_for_early_checks`) and then checks as always, so a split the
second process passed is only hashed and reused if its SHA-256 matches, and a
bad file (never cached) is checked again and named, file and line.  Set
``ULTRA_MULTR_EARLY_CHECKS=0`` to start no second process.

Only the standard library is imported here: this file runs at every start of
the interpreter it is installed in, so it must be cheap and must never raise.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import time
import types
from typing import TYPE_CHECKING, List, Optional, Sequence

if TYPE_CHECKING:
    import argparse
    import subprocess

PLACEHOLDER_ATTRIBUTE = "__ultra_multr_placeholder__"
#: Free space below which a failed checkpoint write is reported as a full disk.
DISK_FULL_BYTES = 1 << 20
#: When the interpreter started (this hook runs first): progress lines say how long start-up took.
PROCESS_STARTED = time.time()
#: Environment variable; "0" starts no early data checks.  The second process gets it set to "0", so that
#: it starts none itself.
EARLY_CHECKS_ENV = "ULTRA_MULTR_EARLY_CHECKS"
#: Seconds our algorithm waits for the early checks before it stops them and checks in its own process.
EARLY_CHECKS_TIMEOUT_S = 1800.0
#: The options of ULTRA's main.py that choose what data it reads and which algorithm, with main.py's defaults.
MAIN_PY_OPTIONS = {
    "data_dir": "./tests/data/", "train_data_prefix": "train", "valid_data_prefix": "valid",
    "test_data_prefix": "test", "click_model_dir": None,
    "setting_file": "./example/offline_setting/dla_exp_settings.json", "test_only": False, "test_while_train": False,
}
#: The early data checks this process started (None: none started, or already waited for).
EARLY_CHECKS: Optional[subprocess.Popen[bytes]] = None


def _tensorflow_installed() -> bool:
    if "tensorflow" in sys.modules:
        return not getattr(sys.modules["tensorflow"], PLACEHOLDER_ATTRIBUTE, False)
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def _import_tensorboard_first() -> None:
    """Import torch's tensorboard module before the placeholder goes in.

    ULTRA's ``dla.py`` imports ``torch.utils.tensorboard``, which probes
    ``tensorflow.io.gfile`` at import time and fails on the empty placeholder.
    Imported first, tensorboard sees that TensorFlow is absent and uses its
    own stub, as it does for ULTRA's main.py (which imports it before ultra).
    """
    try:
        importlib.import_module("torch.utils.tensorboard")
    except Exception:  # no torch / tensorboard: ULTRA's import will say so
        pass


class _UltraLoader(importlib.abc.Loader):
    """Runs ULTRA's own loader with a TensorFlow placeholder in place."""

    def __init__(self, wrapped: importlib.abc.Loader) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str):  # get_source, get_resource_reader, ...
        return getattr(self._wrapped, name)

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self._wrapped.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        placeholder = None
        if not _tensorflow_installed():
            _import_tensorboard_first()
            placeholder = types.ModuleType("tensorflow")
            placeholder.__doc__ = "Empty stand-in for ULTRA's unused TensorFlow import."
            setattr(placeholder, PLACEHOLDER_ATTRIBUTE, True)
            sys.modules["tensorflow"] = placeholder
        try:
            self._wrapped.exec_module(module)
        finally:
            if placeholder is not None and sys.modules.get("tensorflow") is placeholder:
                del sys.modules["tensorflow"]


class UltraImportFinder(importlib.abc.MetaPathFinder):
    """Finds ``ultra`` with the other finders and wraps its loader."""

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]] = None,
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != "ultra":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _UltraLoader(spec.loader)
                return spec
        return None


def explain_main_py_failure(error: BaseException) -> Optional[str]:
    """One line naming the culprit of an uncaught exception in ULTRA's main.py (None: no idea)."""
    frames = [tb.tb_frame for tb in _tracebacks(error.__traceback__)]
    main = _main_py_namespace(frames)
    if main is None:
        return None
    args = main.args
    reader = next((f.f_locals for f in frames if {"self", "data_path", "file_prefix"} <= set(f.f_locals)), None)
    if reader is not None:
        from ultra_multr.data import checks  # imported only on this failure path

        try:
            checks.check_data_dir(reader["data_path"], [reader["file_prefix"]])
        except checks.DataCheckError as found:
            return "data check: %s" % found
        return None
    for caller, callee in zip(frames, frames[1:]):  # main.py's train(): torch.save(..., checkpoint_path)
        if (
            caller.f_code.co_filename == main.__file__
            and "checkpoint_path" in caller.f_locals
            and callee.f_globals.get("__name__", "").startswith("torch")
        ):
            return _explain_failed_save(caller.f_locals["checkpoint_path"], error)
    # main.py's main() calls json.load(open(args.setting_file)) itself: its frame, then json's.
    for caller, callee in zip(frames, frames[1:]):
        if (
            caller.f_code.co_name == "main"
            and caller.f_code.co_filename == main.__file__
            and callee.f_globals.get("__name__", "").startswith("json")
            and type(error).__name__ == "JSONDecodeError"
        ):
            return "the settings file %s is not valid JSON: %s" % (args.setting_file, error)
    return None


def _main_py_namespace(frames: List[types.FrameType]) -> Optional[types.SimpleNamespace]:
    """main.py's ``args`` and ``__file__``: from ``__main__`` when it is main.py (``python main.py``), else from
    main.py's module frame in the traceback (``runpy``, as the runner's seeded_main runs it, restores
    ``__main__`` before the exception reaches the hook).  None: main.py has not parsed its arguments."""
    main = sys.modules.get("__main__")
    namespaces = [vars(main)] if main is not None else []
    namespaces += [frame.f_globals for frame in frames if is_ultra_main_py(frame.f_code.co_filename)]
    for namespace in namespaces:
        args = namespace.get("args")
        if args is not None and hasattr(args, "setting_file") and namespace.get("__file__"):
            return types.SimpleNamespace(args=args, __file__=namespace["__file__"])
    return None


def _explain_failed_save(path: str, error: BaseException) -> str:
    """Name the checkpoint main.py failed to write, and the free space of its file system."""
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
        free = stat.f_bavail * stat.f_frsize
    except OSError:
        return "main.py could not save the ranker checkpoint %s (%s)" % (path, error)
    cause = (
        "the disk is full (No space left on device: %d bytes free on its file system)" % free
        if free < DISK_FULL_BYTES
        else "%d bytes are free on its file system; torch.save's message names no cause" % free
    )
    return "main.py could not save the ranker checkpoint %s: %s; the file left there is partial" % (path, cause)


def _tracebacks(tb) -> List[types.TracebackType]:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    return frames


def _excepthook_with_explanation(previous):
    def hook(exc_type, error, tb):
        previous(exc_type, error, tb)
        try:
            explanation = explain_main_py_failure(error)
        except Exception:  # an explanation must never hide the original error
            explanation = None
        if explanation:
            sys.stderr.write("ultra_multr: %s\n" % explanation)

    hook.ultra_multr_hook = True  # type: ignore[attr-defined]
    return hook


def is_ultra_main_py(script: str) -> bool:
    """Whether ``script`` (``sys.argv[0]``) is ULTRA's main.py: named main.py, beside the ``ultra`` package."""
    directory = os.path.dirname(os.path.abspath(script))
    return os.path.basename(script) == "main.py" and os.path.isdir(os.path.join(directory, "ultra"))


def parse_main_py_argv(argv: Sequence[str]) -> Optional[types.SimpleNamespace]:
    """The options of :data:`MAIN_PY_OPTIONS` from main.py's arguments (``sys.argv[1:]``), as main.py reads them.

    Reads ``--name value`` and ``--name=value`` under the full option names
    (an abbreviation argparse would accept is ignored here); the two boolean
    flags are on with any non-empty value, as with main.py's ``type=bool``.
    None without ``--data_dir`` and with ``-h`` / ``--help``.
    """
    values = dict(MAIN_PY_OPTIONS)
    given = set()
    for i, token in enumerate(argv):
        if token in ("-h", "--help"):
            return None
        name, equals, value = token.partition("=")
        option = name[2:]
        if not name.startswith("--") or option not in values:
            continue
        if not equals:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        values[option] = bool(value) if isinstance(MAIN_PY_OPTIONS[option], bool) else value
        given.add(option)
    return types.SimpleNamespace(**values) if "data_dir" in given else None


def splits_main_py_reads(args: argparse.Namespace | types.SimpleNamespace) -> List[str]:
    """The split prefixes ULTRA's ``main.py`` reads with these arguments.

    ``--test_only``: the test split; otherwise train and valid, and test with
    ``--test_while_train``.  main.py's ``--data_format`` is unused by ULTRA:
    its reader goes by the files present, and so do the checks.
    """
    if args.test_only:
        return [args.test_data_prefix]
    return [args.train_data_prefix, args.valid_data_prefix] + ([args.test_data_prefix] if args.test_while_train else [])


def _runs_our_algorithm(setting_file: str) -> bool:
    """Whether main.py's settings file names one of our algorithms (only they check the data)."""
    import json  # only for main.py

    try:
        with open(setting_file) as handle:
            algorithm = json.load(handle).get("learning_algorithm")
    except (OSError, ValueError, AttributeError):  # main.py will say what is wrong with the file
        return False
    return isinstance(algorithm, str) and algorithm.startswith("ultra_multr.")


def early_checks_command(argv: Sequence[str]) -> Optional[List[str]]:
    """The command that checks the splits ULTRA's main.py will read with ``argv`` (``sys.argv``).

    None when no early checks are due: switched off (``ULTRA_MULTR_EARLY_CHECKS=0``),
    the script is not ULTRA's main.py, no ``--data_dir`` or not a directory,
    ``--help``, or an algorithm that is not ours (nothing would wait for them).  main.py's
    ``--click_model_dir`` (the ULTRE layout) is passed on, and under ``--test_only`` the split it ranks
    (``--ranklist_split``), as our algorithm's checks will check them (the same cache entries).
    """
    if os.environ.get(EARLY_CHECKS_ENV) == "0" or not argv or not is_ultra_main_py(argv[0]):
        return None
    args = parse_main_py_argv(argv[1:])
    if args is None or not os.path.isdir(args.data_dir):
        return None
    if not _runs_our_algorithm(args.setting_file):
        return None
    command = [sys.executable, "-m", "ultra_multr.data.checks", args.data_dir, "--splits"] + splits_main_py_reads(args)
    command += [] if args.click_model_dir is None else ["--click_model_dir", args.click_model_dir]
    return command + (["--ranklist_split", args.test_data_prefix] if args.test_only else [])


def start_early_checks(argv: Sequence[str]) -> None:
    """Start :func:`early_checks_command` in a second process, once per process (never raises).

    Its output goes nowhere: what counts is the check cache it fills, and a
    failure is found again and reported by the check in this process.  It
    exits when its checks are done, also when main.py failed first.
    """
    global EARLY_CHECKS
    try:
        command = early_checks_command(argv) if EARLY_CHECKS is None else None
        if command is not None:
            import subprocess  # only for main.py

            EARLY_CHECKS = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=dict(os.environ, **{EARLY_CHECKS_ENV: "0"}),
            )
    except Exception:  # the checks in this process still run
        pass


def wait_for_early_checks(timeout_s: float = EARLY_CHECKS_TIMEOUT_S) -> Optional[str]:
    """Wait for the early checks this process started; returns a line for the log (None: none started).

    The checks still running after ``timeout_s`` are stopped.  Either way the
    caller then checks as usual: what the second process recorded is reused
    only through the check cache's SHA-256 verification.
    """
    global EARLY_CHECKS
    process, EARLY_CHECKS = EARLY_CHECKS, None
    if process is None:
        return None
    import subprocess

    started = time.perf_counter()
    try:
        status = process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return ("data checks: the second process started at start-up (pid %d) was still running after "
                "%g s; stopped it, checking here" % (process.pid, timeout_s))
    return ("data checks ran in a second process started at start-up (pid %d, exit status %d); "
            "waited %.1f s for it" % (process.pid, status, time.perf_counter() - started))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` and chain the exception hook (idempotent, never raises)."""
    try:
        if not any(isinstance(f, UltraImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, UltraImportFinder())
        if not getattr(sys.excepthook, "ultra_multr_hook", False):
            sys.excepthook = _excepthook_with_explanation(sys.excepthook)
    except Exception:  # pragma: no cover - a .pth hook must not break start-up
        pass


install()
start_early_checks(getattr(sys, "argv", []))
