"""How well the learner's features predict the logged order, on both groups: the statistic of logger_guard=order_fit.

Usage::

    python studies/paper_setting/logged_order.py --work WORK_DIR --out studies/paper_setting/results/logged_order

Writes, per data set, the agreement of :func:`ultra_multr.components.guards.fit_to_logged_order` (a 2-layer ranker
fitted to the logged order of 80 % of the training queries, its share of the other queries' document pairs
ordered as the logger did; the seed MULTR's guard uses, 0) to ``OUT.csv`` and ``OUT.md``.  The data: the
screen's eight recipes of ULTRA's recipe (``SCREENED_RECIPES``) and the headroom study's stress sets (a logger
that orders by the label plus noise; ``studies/headroom/run.py``'s defaults, seeds ``--stress-seeds``), generated
into ``WORK_DIR`` when missing there (a generated set is reused only when its recipe file matches).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys

import ultra

from ultra_multr.components.guards import fit_to_logged_order
from ultra_multr.feeds.arrays import query_arrays
from ultra_multr.files import atomic_write_text
from ultra_multr.generate.ultra_dataset import write_stress_set
from ultra_multr.generate.ultra_recipe import SCREENED_RECIPES, write_recipe_dataset



def agreement(data_dir: str) -> dict:
    data = ultra.utils.read_data(data_dir.rstrip("/") + "/", "train", None, 10)
    arrays = query_arrays(data, 10)
    fit = fit_to_logged_order(arrays, 0)
    return {"agreement": round(fit.agreement, 4), "training_queries": arrays.n_queries,
            "heldout_queries": fit.heldout_queries, "heldout_pairs": fit.heldout_pairs}


def generated(work: str, name: str, description: dict, write) -> str:
    """``work/name``, written by ``write(path)`` unless it holds a set made from the same description."""
    path = os.path.join(work, name)
    stamp = os.path.join(path, "logged_order_recipe.json")
    text = json.dumps(description, sort_keys=True)
    if not (os.path.exists(stamp) and open(stamp).read() == text):
        write(path)
        atomic_write_text(stamp, text)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="where the data sets are generated")
    parser.add_argument("--out", required=True, help="output path without extension (.csv and .md are written)")
    parser.add_argument("--stress-seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--recipe-dirs", nargs="*", default=[], metavar="DIR",
                        help="more data sets of ULTRA's recipe to measure as they are (the grid's further sets, "
                             "studies/paper_setting/screen.py --sets), named by their folder")
    args = parser.parse_args(argv)
    rows = []
    for name, recipe in SCREENED_RECIPES.items():
        path = generated(args.work, name, {"recipe": name, **recipe.__dict__},
                         lambda p, r=recipe: write_recipe_dataset(p, r))
        rows.append({"group": "ultra_recipe", "data": name, **agreement(path)})
    for path in args.recipe_dirs:
        rows.append({"group": "ultra_recipe", "data": os.path.basename(path.rstrip("/")), **agreement(path)})
    for seed in args.stress_seeds:
        path = os.path.join(args.work, "stress_%d" % seed)
        write_stress_set(path, seed)
        rows.append({"group": "stress", "data": "stress_%d" % seed, **agreement(path)})
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(args.out + ".csv", buffer.getvalue())
    lines = ["| group | data | agreement | training queries | held-out pairs |", "|---|---|---|---|---|"]
    lines += ["| %(group)s | %(data)s | %(agreement).3f | %(training_queries)d | %(heldout_pairs)d |" % row for row in rows]
    note = ("Share of held-out document pairs a ranker fitted to the logged order (on the learner's features) orders "
            "as the logger did; written by `studies/paper_setting/logged_order.py`.")
    atomic_write_text(args.out + ".md", note + "\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
