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

It also chains an exception hook that adds one line to the traceback of
failures of ULTRA's ``main.py`` that no code of ours sees, so that the line
names the culprit (only when ``__main__`` is main.py, i.e. has its parsed
``args``):

- an exception raised while ULTRA reads a split (``Raw_data``): the hook runs
  :mod:`ultra_multr.data.checks` on that split, which names the file and line
  or says the split has no query ULTRA keeps ("No valid query has been found.");
- a ``json.JSONDecodeError`` outside the reader: main.py's
  ``json.load(open(args.setting_file))``; the hook names the settings file;
- an ``OSError`` of TensorBoard's event writer (main.py opens its writers
  before the first step, so on a full disk this is often a training's first
  write): the hook names the event file's directory and the cause (the free
  space, or the file-size limit).  TensorBoard writes in a thread, which
  stores the error for the writer's next call in main.py's thread and dies:
  a second hook, on ``threading.excepthook``, prints that thread's error as
  the same line instead of a second traceback; whichever hook runs first
  says it, the other nothing.

main.py's own ``torch.save`` of the ranker checkpoint is made atomic at its
start (:func:`ultra_multr.compat.main_py_start.save_checkpoints_atomically`): its
``DiskFullError`` names the checkpoint and the cause.

When ULTRA has been imported, it makes ULTRA's ``read_data`` the compact
reader (:mod:`ultra_multr.data.compact_reader`: each split's features as one
float32 matrix instead of lists of Python floats; ``ULTRA_MULTR_COMPACT_READER=0``
keeps ULTRA's reader), for main.py, ULTRA's feeds and ours alike.

When the script is ULTRA's main.py, it also starts our data checks of the
splits main.py will read in a second process
(:func:`ultra_multr.compat.early_checks.start_early_checks`): main.py builds our
algorithm, which checks the data only after ULTRA has read every split in one
thread, and on new data the checks cost about as much again.  Started here,
they run on a second core while ULTRA imports and reads; the second process
records each split that passes in the check cache
(:mod:`ultra_multr.data.check_cache`), so a split it passed is only hashed and
reused if its SHA-256 matches, and a bad file (never cached) is checked again
and named, file and line.

Only the standard library is imported here: this file runs at every start of
the interpreter it is installed in, so it must be cheap and must never raise.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import time
import types
from typing import Any, List, Optional, Sequence

from ultra_multr.compat.early_checks import is_ultra_main_py, start_early_checks

PLACEHOLDER_ATTRIBUTE = "__ultra_multr_placeholder__"
#: The module of TensorBoard's event writer (its writer thread and the frames that hold the event file's name).
TENSORBOARD_WRITER = "tensorboard.summary.writer"
#: When the interpreter started (this hook runs first): progress lines say how long start-up took.
PROCESS_STARTED = time.time()

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
        install_compact_reader()


def install_compact_reader() -> None:
    """Make ULTRA's ``read_data`` the compact reader (:mod:`ultra_multr.data.compact_reader`; it hands over to
    ULTRA's own under ``ULTRA_MULTR_COMPACT_READER=0``).  Never raises: where it cannot be installed, one line
    says so and ULTRA's reader reads."""
    try:
        from ultra_multr.data import compact_reader  # numpy and ULTRA: imported now, after ULTRA

        compact_reader.install()
    except Exception as error:  # pragma: no cover - ULTRA's reader still works
        sys.stderr.write("ultra_multr: the compact reader is not installed (%s: %s); ULTRA's reader reads the data\n"
                         % (type(error).__name__, error))


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
    event_file = _tensorboard_event_file(frames)
    if event_file is not None and isinstance(error, OSError):  # said once, here or by the writer thread's hook
        return _event_file_explanation(error, event_file) if _first_to_explain(error) else None
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


def _tensorboard_event_file(frames: List[types.FrameType]) -> Optional[str]:
    """The event file TensorBoard's writer was writing in these frames (its writer's ``_file_name``, or the
    ``filename`` its file layer opened), None when none of them is TensorBoard's."""
    for frame in frames:
        if not frame.f_globals.get("__name__", "").startswith(("tensorboard.", "torch.utils.tensorboard")):
            continue
        name = getattr(frame.f_locals.get("self"), "_file_name", None) or frame.f_locals.get("filename")
        if isinstance(name, (str, bytes)):  # TensorBoard's file layer holds it as bytes
            return os.fsdecode(name)
    return None


#: Taken to claim the one explanation of an error both TensorBoard's writer thread and main.py's raise.
_EXPLAINING = threading.Lock()


def _first_to_explain(error: BaseException) -> bool:
    """Whether this hook is the first to explain ``error`` (then it is marked): TensorBoard's writer thread dies of
    an error which main.py's thread raises again, and either hook may run first."""
    with _EXPLAINING:
        first = not getattr(error, "ultra_multr_explained", False)
        error.ultra_multr_explained = True  # type: ignore[attr-defined]
    return first


def _event_file_explanation(error: OSError, event_file: str) -> str:
    return ("TensorBoard could not write its event file %s: %s; its writer thread stopped at this error, which "
            "main.py's next write, flush or close through it raises"
            % (event_file, _write_error_cause(error, event_file)))


def _write_error_cause(error: OSError, path: str) -> str:
    """The cause of a failed write of ``path`` in words: no room (:func:`ultra_multr.files.no_room_cause`), or
    the error's own."""
    from ultra_multr.files import NO_ROOM_ERRNOS, no_room_cause

    if error.errno in NO_ROOM_ERRNOS:
        return "%s (%s)" % (os.strerror(error.errno), no_room_cause(error.errno, os.path.dirname(path) or "."))
    return "%s: %s" % (type(error).__name__, error)


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


def _thread_excepthook_with_explanation(previous):
    """``threading.excepthook``: an error of TensorBoard's writer thread as one line naming its event file (the
    writer raises it again at its next call in the thread that writes); other threads' errors as before."""

    def hook(args: Any) -> None:
        error, line = args.exc_value, None
        if isinstance(error, OSError) and type(args.thread).__module__.startswith(TENSORBOARD_WRITER):
            try:
                event_file = _tensorboard_event_file([tb.tb_frame for tb in _tracebacks(args.exc_traceback)])
                if event_file is not None:
                    line = _event_file_explanation(error, event_file)
            except Exception:  # an explanation must never hide the original error
                line = None
        if line is None:
            previous(args)
        elif _first_to_explain(error):  # else main.py's thread said it already
            sys.stderr.write("ultra_multr: %s\n" % line)

    hook.ultra_multr_hook = True  # type: ignore[attr-defined]
    return hook


def install() -> None:
    """Put the finder first on ``sys.meta_path`` and chain the exception hooks (idempotent, never raises)."""
    try:
        if not any(isinstance(f, UltraImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, UltraImportFinder())
        if not getattr(sys.excepthook, "ultra_multr_hook", False):
            sys.excepthook = _excepthook_with_explanation(sys.excepthook)
        if not getattr(threading.excepthook, "ultra_multr_hook", False):
            threading.excepthook = _thread_excepthook_with_explanation(threading.excepthook)
    except Exception:  # pragma: no cover - a .pth hook must not break start-up
        pass


install()
start_early_checks(getattr(sys, "argv", []))
