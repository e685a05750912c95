"""Run ULTRA's unmodified ``main.py`` with Python's, numpy's and torch's RNGs seeded.

main.py sets no seed: its click simulation draws from ``random`` and the
models initialise from torch's generator.  This wrapper seeds them and then
executes main.py as ``__main__`` (``runpy``), exactly as ``python main.py``
would, so a run is a function of its seed.  It starts the early data checks
the start-up hook starts for ``python main.py``
(:func:`ultra_multr.compat.early_checks.start_early_checks`).

Usage::

    python -m ultra_multr.experiments.runner.seeded_main --seed 3 /path/to/main.py [main.py arguments...]
"""
from __future__ import annotations

import os
import runpy
import sys
from typing import List, Sequence

from ultra_multr.compat.early_checks import start_early_checks


def _parse(argv: Sequence[str]) -> tuple:
    argv = list(argv)
    if len(argv) < 3 or argv[0] != "--seed":
        raise SystemExit("usage: python -m ultra_multr.experiments.runner.seeded_main --seed N MAIN_PY [ARGS...]")
    try:
        seed = int(argv[1])
    except ValueError:
        raise SystemExit("--seed: expected an integer, got %r" % argv[1]) from None
    main_py = argv[2]
    if not os.path.isfile(main_py):
        raise SystemExit("main.py not found: %s" % main_py)
    rest = argv[3:]
    if "--setting_file" in rest[:-1]:  # main.py's json.load error would not name the file
        from ultra_multr.files import JsonFileError, read_json

        try:
            read_json(rest[rest.index("--setting_file") + 1])
        except JsonFileError as error:
            raise SystemExit("error: %s" % error) from None
    return seed, os.path.abspath(main_py), rest


def main(argv: List[str] = None) -> None:
    seed, main_py, rest = _parse(sys.argv[1:] if argv is None else argv)
    sys.argv = [main_py] + rest
    # What the start-up hook does for `python main.py` (it saw this module's arguments): before torch imports.
    start_early_checks(sys.argv)
    # Our algorithms also seed from their seed= hparam; this covers ULTRA's own classes.
    from ultra_multr.algorithms.base import seed_everything

    seed_everything(seed)
    # `python main.py` puts the script's directory first on sys.path.
    sys.path.insert(0, os.path.dirname(main_py))
    runpy.run_path(main_py, run_name="__main__")


if __name__ == "__main__":
    main()
