"""A Python that has imported what every main.py run imports (torch, torch._dynamo, TensorBoard's writer, ULTRA and
ultra_multr: about 3 s of a 4 s test run) and forks one child per request to run ULTRA's unmodified main.py.

Used by ``conftest.run_ultra_main`` for runs whose environment is the one this process started with; the child
runs main.py as the runner's ``seeded_main`` does (``runpy`` as ``__main__``, main.py's folder first on sys.path),
with its stdout and stderr in files, and ends as an interpreter does: an uncaught exception through
``sys.excepthook`` (ours, chained by the startup hook), then the ``atexit`` handlers, then its exit status.

Protocol (one request at a time, JSON lines): stdin ``{"args", "cwd", "stdout", "stderr"}``; stdout
``{"pid": P}`` when the child started, then ``{"returncode": R}`` (``-signal`` when a signal ended it, as
``subprocess`` says).
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import sys


def _child(main_py: str, request: dict) -> int:
    """Run ``main_py`` in this (forked) process; its exit status."""
    os.chdir(request["cwd"])
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.argv = [main_py] + list(request["args"])
    code = 0
    try:
        runpy.run_path(main_py, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # what the interpreter does with an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def serve(main_py: str) -> None:
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # never returns to this loop
            code = 70
            try:
                code = _child(main_py, request)
            except BaseException:  # the child could not start main.py: said on its stderr
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[1]))  # main.py's folder, as for main.py itself
    # torch._dynamo: an optimizer's first step imports it (1.4 s); the ULTRA imports run the startup hook's patches
    for module in ("torch", "torch._dynamo", "torch.utils.tensorboard", "ultra", "ultra.input_layer",
                   "ultra.learning_algorithm", "ultra.ranking_model", "ultra.utils", "ultra_multr.algorithms"):
        importlib.import_module(module)
    serve(sys.argv[1])
