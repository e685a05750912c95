"""The package's floors: every import (module level or inside a function) points to the same floor or one
below, and no module imports itself back through others.  A new module must be given a floor here."""
from __future__ import annotations

import ast
import fnmatch
import os
from typing import Dict, List, Set

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ultra_multr")

#: Floors, lowest first; a module's floor is the first whose patterns match its dotted name (without the
#: package's own name).  docs/layout.md describes them.
FLOORS = [
    ("ground", ["", "files", "config", "randomization", "interventions", "metrics", "click_metrics", "batch",
                "fingerprints", "logged_order", "progress", "tensorboard", "losses", "losses.*", "click_models",
                "click_models.models"]),
    ("simulator", ["simulator", "simulator.*"]),
    ("above the simulator", ["imputation", "click_models.evaluation", "click_logs", "click_logs.baidu_schema",
                             "click_logs.baidu", "click_logs.standardize"]),
    ("ULTRA glue", ["compat", "compat.*", "data", "data.checks", "data.check_cache", "data.feature_fields",
                    "data.settings", "data.ultre", "data.ultre_checks", "data.compact_reader", "data.feature_text",
                    "data.feature_cache", "session_budget", "click_models.ultra"]),
    ("feeds", ["feeds", "feeds.*"]),
    ("components", ["components", "components.*"]),
    ("algorithms", ["algorithms", "algorithms.*"]),
    ("tooling", ["data.*", "generate", "generate.*", "click_logs.*", "experiments", "experiments.*"]),
]


def modules() -> Dict[str, str]:
    """Dotted name (without ``ultra_multr.``; "" for the package) -> file."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, PACKAGE)[:-3].split(os.sep)
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: str, known: Dict[str, str]) -> Set[str]:
    """The package's modules that ``name`` imports anywhere in its file (package inits included)."""
    is_package = path.endswith("__init__.py")
    package = name if is_package else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
                module = "ultra_multr" + ("." + module if module else "")
            else:
                module = node.module or ""
            candidates = [module] + [module + "." + alias.name for alias in node.names]
        else:
            continue
        for candidate in candidates:
            if candidate == "ultra_multr" or candidate.startswith("ultra_multr."):
                dotted = candidate[len("ultra_multr."):] if candidate != "ultra_multr" else ""
                if dotted in known and dotted != name:
                    targets.add(dotted)
                    # importing a.b.c runs the inits of a and a.b too
                    parts = dotted.split(".")
                    targets.update(".".join(parts[:k]) for k in range(1, len(parts)) if ".".join(parts[:k]) != name)
    return targets


def floor(name: str) -> int:
    for level, (_, patterns) in enumerate(FLOORS):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            return level
    raise AssertionError("ultra_multr.%s has no floor in tests/test_layers.py's FLOORS" % name)


@pytest.fixture(scope="module")
def graph() -> Dict[str, Set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_every_module_has_a_floor(graph):
    for name in graph:
        floor(name)


def test_no_import_points_to_a_higher_floor(graph):
    upward: List[str] = []
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if floor(target) > floor(name) and not target.startswith(name + "."):
                upward.append("ultra_multr.%s (%s) imports ultra_multr.%s (%s)"
                              % (name, FLOORS[floor(name)][0], target, FLOORS[floor(target)][0]))
    assert not upward, "\n".join(upward)


def test_no_import_circle(graph):
    # a package's init may import its own modules; everything else must form a DAG
    edges = {name: {t for t in targets if not (name and t.startswith(name + ".")) and not (name == "" and t)}
             for name, targets in graph.items()}
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                circle = stack[stack.index(target):] + [target]
                raise AssertionError("import circle: " + " -> ".join("ultra_multr." + m for m in circle))
            if target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)


def test_the_check_sees_an_upward_import(tmp_path):
    """The walk finds imports inside functions, relative ones and package inits (else the tests above pass
    on anything)."""
    known = {"losses": "", "algorithms.dla": "", "algorithms": "", "simulator.model": "", "simulator": ""}
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from ..algorithms.dla import DLA\n    import ultra_multr.simulator.model\n")
    assert imports("losses.mod", str(source), known) == {"algorithms.dla", "algorithms", "simulator.model",
                                                         "simulator"}
    assert floor("algorithms.dla") > floor("losses.mod")
