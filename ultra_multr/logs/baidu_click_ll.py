"""Click log-likelihood on held-out Baidu-ULTR sessions (the benchmark's click metric), per file, one file in memory.

Scores :mod:`ultra_multr.click_model_evaluation` session models on logged
sessions: each held-out session is its own list (its documents at their
logged positions: a gap the release's writer left is a slot never shown, scored
nowhere), and a model predicts ``P(c_t | c_<t)`` at every shown position:

* ``MULTR simulator``: the user simulator MULTR trained (its checkpoint);
* ``position CTR``: a click model of the position alone, the training
  sessions' click-through rate per logged position (a :class:`FittedPBM` with
  attractiveness 1), the floor any click model should beat.

Numbers (nats): log-likelihood per session (mean over sessions of the sum
over shown positions), per position (mean over the sessions showing it) and
the perplexity per position ``exp(-LL_t)`` with its mean over positions.

Two populations of sessions (``population``): ``all`` (the benchmark's), and
``clicked``, the sessions with a click in the first N positions, the only
ones MULTR's simulator is trained and early-stopped on (main.py draws
training batches with ``check_validation=True``, which skips click-less
sessions): the simulator models clicks *given* at least one, so on ``all``
it over-predicts clicks by construction.  For ``clicked`` the floor is
fitted on the training files' clicked sessions too.

``python -m ultra_multr.logs.baidu_click_ll --simulator M/ultra_multr.MULTR.simulator.ckpt
--train_files 'parts/part-[123]_split-*.feather' --heldout_files 'parts/part-0_split-*.feather' --out O
[--population clicked]``
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from typing import Dict, List, Sequence

import numpy as np
import torch

from ..click_model_evaluation import (
    FittedPBM, QueryLists, SessionModel, Sessions, SimulatorModel, slot_log_likelihood,
)
from ..data.ultra_format import atomic_write_text
from ..simulator.checkpoint import check_compatible, load_simulator
from . import baidu

RESULT_JSON = "click_log_likelihood.json"
#: population -> the result file's name
RESULT_FILES = {"all": RESULT_JSON, "clicked": "click_log_likelihood_clicked.json"}


def sessions_of(paths: Sequence[str], features: str, top_n: int, log1p_lexical: bool, population: str):
    """:func:`baidu.iter_sessions`, each file's sessions restricted to ``population`` ("all" or "clicked")."""
    if population not in RESULT_FILES:
        raise ValueError("population=%r: expected one of %s" % (population, ", ".join(RESULT_FILES)))
    for sessions in baidu.iter_sessions(paths, features, top_n, log1p_lexical):
        if population == "clicked":
            rows = sessions.clicks.sum(axis=1) > 0
            sessions = dataclasses.replace(sessions, **{
                field.name: getattr(sessions, field.name)[rows]
                for field in dataclasses.fields(sessions) if isinstance(getattr(sessions, field.name), np.ndarray)})
        yield sessions


def as_lists(sessions: baidu.Sessions) -> tuple:
    """(QueryLists, Sessions): every logged session is its own list."""
    lists = QueryLists(torch.from_numpy(sessions.features), torch.zeros(sessions.mask.shape, dtype=torch.float64),
                       torch.from_numpy(sessions.mask))
    return lists, Sessions(torch.arange(len(sessions)), torch.from_numpy(sessions.clicks))


def position_ctr(paths: Sequence[str], top_n: int, population: str = "all") -> FittedPBM:
    """The ``position CTR`` model of the training files' ``population`` (clicks per shown position; one file
    at a time)."""
    clicks, shown = np.zeros(top_n), np.zeros(top_n)
    for sessions in sessions_of(paths, "lexical", top_n, True, population):
        clicks += sessions.clicks.sum(0)
        shown += sessions.mask.sum(0)
    ctr = torch.from_numpy(clicks / np.maximum(shown, 1.0))
    model = FittedPBM(ctr, torch.ones(1, top_n, dtype=torch.float64))  # one row: broadcast over the sessions
    model.name = "position CTR"
    return model


def score_files(models: Sequence[SessionModel], paths: Sequence[str], features: str, top_n: int,
                log1p_lexical: bool = True, population: str = "all") -> Dict[str, Dict]:
    """Each model's held-out numbers (see the module docstring) over the ``population`` sessions of ``paths``."""
    totals = {m.name: {"sum": 0.0, "sessions": 0, "per_position": np.zeros(top_n), "shown": np.zeros(top_n)}
              for m in models}
    for sessions in sessions_of(paths, features, top_n, log1p_lexical, population):
        lists, logged = as_lists(sessions)
        for model in models:
            log_lik = slot_log_likelihood(model.conditional_click_probs(lists, logged), logged, lists).numpy()
            total = totals[model.name]
            total["sum"] += float(log_lik.sum())
            total["sessions"] += len(sessions)
            total["per_position"] += log_lik.sum(0)
            total["shown"] += sessions.mask.sum(0)
    results = {}
    for name, total in totals.items():
        per_position = np.where(total["shown"] > 0, total["per_position"] / np.maximum(total["shown"], 1), math.nan)
        perplexity = np.exp(-per_position)
        results[name] = {
            "log_likelihood": total["sum"] / max(total["sessions"], 1),
            "log_likelihood_per_position": per_position.tolist(),
            "perplexity": float(np.nanmean(perplexity)),
            "perplexity_per_position": perplexity.tolist(),
            "sessions": total["sessions"],
        }
    return results


def evaluate(simulator_path: str, train_files: Sequence[str], heldout_files: Sequence[str], out_dir: str,
             features: str = "lexical", top_n: int = 10, log1p_lexical: bool = True,
             population: str = "all") -> Dict[str, Dict]:
    """Score the simulator and the position CTR on the ``population`` sessions of ``heldout_files``; writes
    ``out_dir/`` :data:`RESULT_FILES` ``[population]``.

    Raises:
        ValueError: the simulator's feature or list size does not fit ``features`` and ``top_n``.
    """
    simulator, _ = load_simulator(simulator_path)
    check_compatible(simulator.config, baidu.feature_size(features), top_n, simulator_path)
    models: List[SessionModel] = [SimulatorModel(simulator), position_ctr(train_files, top_n, population)]
    results = score_files(models, heldout_files, features, top_n, log1p_lexical, population)
    record = {"heldout_files": list(heldout_files), "train_files": list(train_files), "population": population,
              "models": results}
    atomic_write_text(os.path.join(out_dir, RESULT_FILES[population]), json.dumps(record, indent=1) + "\n")
    return results


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulator", required=True, help="MULTR's simulator checkpoint (in main.py's --model_dir)")
    parser.add_argument("--train_files", required=True, help="glob patterns of the training click files, ';'-separated")
    parser.add_argument("--heldout_files", required=True, help="glob patterns of the held-out click files")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--features", default="lexical", choices=baidu.FEATURE_SETS)
    parser.add_argument("--top_n", type=int, default=10)
    parser.add_argument("--no_log1p", action="store_true")
    parser.add_argument("--population", choices=sorted(RESULT_FILES), default="all",
                        help="all held-out sessions, or those with a click (the simulator's training population)")
    args = parser.parse_args(argv)
    split = lambda text: baidu.log_files([p for p in text.split(";") if p.strip()])  # noqa: E731
    results = evaluate(args.simulator, split(args.train_files), split(args.heldout_files), args.out, args.features,
                       args.top_n, not args.no_log1p, args.population)
    for name, values in results.items():
        print("%-16s held-out click log-likelihood %.4f per session, perplexity %.4f (%d sessions)"
              % (name, values["log_likelihood"], values["perplexity"], values["sessions"]))


if __name__ == "__main__":
    main()
