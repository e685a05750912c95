"""Our data checks of the splits ULTRA's main.py will read, started in a second process at interpreter start.

main.py builds our algorithm, which checks the data
(:func:`ultra_multr.data.checks.check_main_py_data`), only after ULTRA has
read every split in one thread.  The start-up hook (:mod:`.startup`) calls
:func:`start_early_checks`, which runs ``python -m ultra_multr.data.checks`` on
those splits in a second process at once; our algorithm then waits for it
(:func:`wait_for_early_checks`) and checks as always, so a split the second
process checked is verified through the check cache, not read twice.  Set
``ULTRA_MULTR_EARLY_CHECKS=0`` to start no second process.  This module reads
main.py's arguments itself (:func:`parse_main_py_argv`): it runs before
main.py parses them, and imports nothing beyond the standard library.
"""
from __future__ import annotations

import os
import sys
import time
import types
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

if TYPE_CHECKING:
    import argparse
    import subprocess

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
    "max_list_cutoff": 0,
}
#: The command-line option of ``python -m ultra_multr.data.checks`` for each keyword of :func:`main_py_checks` but the
#: data dir and the splits.
CHECK_OPTIONS = {"click_model_dir": "--click_model_dir", "ranklist_split": "--ranklist_split",
                 "list_cutoff": "--max_list_cutoff"}
#: The early data checks this process started (None: none started, or already waited for).
EARLY_CHECKS: Optional[subprocess.Popen[bytes]] = None


def is_ultra_main_py(script: str) -> bool:
    """Whether ``script`` (``sys.argv[0]``) is ULTRA's main.py: named main.py, beside the ``ultra`` package."""
    directory = os.path.dirname(os.path.abspath(script))
    return os.path.basename(script) == "main.py" and os.path.isdir(os.path.join(directory, "ultra"))


def parse_main_py_argv(argv: Sequence[str]) -> Optional[types.SimpleNamespace]:
    """The options of :data:`MAIN_PY_OPTIONS` from main.py's arguments (``sys.argv[1:]``), as main.py reads them.

    Reads ``--name value`` and ``--name=value`` under the full option names
    (an abbreviation argparse would accept is ignored here); the two boolean
    flags are on with any non-empty value, as with main.py's ``type=bool``.
    None without ``--data_dir``, with ``-h`` / ``--help``, and with an integer
    option that is not an integer (main.py's argparse refuses it itself).
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
        default = MAIN_PY_OPTIONS[option]
        if isinstance(default, bool):
            values[option] = bool(value)
        elif isinstance(default, int):
            try:
                values[option] = int(value)
            except ValueError:
                return None
        else:
            values[option] = value
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


def main_py_checks(args: argparse.Namespace | types.SimpleNamespace) -> Dict[str, Any]:
    """What the data checks check for ULTRA's main.py with these arguments: the keyword arguments of
    :func:`ultra_multr.data.checks.check_data_dir` (our algorithm's checks, and the early ones, through the command
    line :func:`early_checks_command` makes of them).

    The splits main.py reads (:func:`splits_main_py_reads`), the layout its
    ``--click_model_dir`` selects, under ``--test_only`` the split it writes a
    ranklist of (``ranklist_split``: each qid on one line), and its
    ``--max_list_cutoff`` (``list_cutoff``: a libsvm query longer than it is
    refused).
    """
    return {"data_dir": args.data_dir, "splits": splits_main_py_reads(args), "click_model_dir": args.click_model_dir,
            "ranklist_split": args.test_data_prefix if args.test_only else None, "list_cutoff": args.max_list_cutoff}


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
    ``--help``, or an algorithm that is not ours (nothing would wait for them).  It checks what
    :func:`main_py_checks` says, as our algorithm's checks will check it (the same cache entries).
    """
    if os.environ.get(EARLY_CHECKS_ENV) == "0" or not argv or not is_ultra_main_py(argv[0]):
        return None
    args = parse_main_py_argv(argv[1:])
    if args is None or not os.path.isdir(args.data_dir):
        return None
    if not _runs_our_algorithm(args.setting_file):
        return None
    checks = main_py_checks(args)
    command = [sys.executable, "-m", "ultra_multr.data.checks", checks["data_dir"], "--splits"] + checks["splits"]
    for key, option in CHECK_OPTIONS.items():
        if checks[key]:
            command += [option, str(checks[key])]
    return command


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
