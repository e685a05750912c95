"""Click log-likelihood on held-out Baidu-ULTR sessions (the benchmark's click metric), per file, one file in memory.

Scores :mod:`ultra_multr.click_models.evaluation` session models on logged
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

Features are standardised as the simulator was trained (:mod:`ultra_multr.click_logs.standardize`):
with the statistics stored beside its checkpoint (``feature_standardization.json`` in main.py's
--model_dir, which the feed writes), else none, or those of ``--standardization``.

With ``--data_dir`` of a data directory converted with ``--protocol reproducibility``, only the
test half of the held-out sessions is scored (ultr-reproducibility's click log-likelihood test; the
other half is main.py's validation), by :func:`ultra_multr.click_logs.baidu_convert.heldout_rows`.

``python -m ultra_multr.click_logs.baidu_click_ll --simulator M/ultra_multr.MULTR.simulator.ckpt
--train_files 'parts/part-[123]_split-*.feather' --heldout_files 'parts/part-0_split-*.feather' --out O
[--population clicked] [--data_dir D]``
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ultra_multr.click_models.evaluation import (
    FittedPBM, QueryLists, SessionModel, Sessions, SimulatorModel, slot_log_likelihood,
)
from ultra_multr.files import atomic_write_text
from ultra_multr.files import read_json
from ultra_multr.progress import progress
from ultra_multr.simulator.checkpoint import check_compatible, load_simulator
from ultra_multr.click_logs import baidu, standardize
from ultra_multr.click_logs.baidu_convert import CONVERSION_JSON, heldout_rows

RESULT_JSON = "click_log_likelihood.json"
#: population -> the result file's name
RESULT_FILES = {"all": RESULT_JSON, "clicked": "click_log_likelihood_clicked.json"}


def select_rows(sessions: baidu.Sessions, rows: np.ndarray) -> baidu.Sessions:
    """The sessions ``rows`` (bool mask or indices) of ``sessions``."""
    return dataclasses.replace(sessions, **{
        field.name: getattr(sessions, field.name)[rows]
        for field in dataclasses.fields(sessions) if isinstance(getattr(sessions, field.name), np.ndarray)})


def sessions_of(paths: Sequence[str], features: str, top_n: int, log1p_lexical: bool, population: str,
                stats: Optional[standardize.Standardizer] = None, rows: Optional[Dict[str, np.ndarray]] = None):
    """:func:`baidu.iter_sessions`, each file's sessions restricted to ``rows[path]`` (when given) and to
    ``population`` ("all" or "clicked"), standardised by ``stats`` (when given)."""
    if population not in RESULT_FILES:
        raise ValueError("population=%r: expected one of %s" % (population, ", ".join(RESULT_FILES)))
    for sessions in progress(baidu.iter_sessions(paths, features, top_n, log1p_lexical, "clicks"), total=len(paths),
                             desc="click log-likelihood: files", unit="files"):
        if rows is not None:
            sessions = select_rows(sessions, rows[sessions.path])
        if population == "clicked":
            sessions = select_rows(sessions, sessions.clicks.sum(axis=1) > 0)
        yield sessions if stats is None else stats.apply_sessions(sessions)


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
                log1p_lexical: bool = True, population: str = "all",
                stats: Optional[standardize.Standardizer] = None,
                rows: Optional[Dict[str, np.ndarray]] = None) -> Dict[str, Dict]:
    """Each model's held-out numbers (see the module docstring) over the ``population`` sessions of ``paths``
    (those of ``rows`` when given)."""
    totals = {m.name: {"sum": 0.0, "sessions": 0, "per_position": np.zeros(top_n), "shown": np.zeros(top_n)}
              for m in models}
    for sessions in sessions_of(paths, features, top_n, log1p_lexical, population, stats, rows):
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
             population: str = "all", standardization: Optional[str] = None,
             data_dir: Optional[str] = None) -> Dict[str, Dict]:
    """Score the simulator and the position CTR on the ``population`` sessions of ``heldout_files``; writes
    ``out_dir/`` :data:`RESULT_FILES` ``[population]``.

    Args:
        standardization: the statistics' JSON (None: the one beside ``simulator_path``, else none).
        data_dir: a data directory converted with ``--protocol reproducibility``: score only the test half
            of the held-out sessions (its ``heldout_files`` must be ``heldout_files``).

    Raises:
        ValueError: the simulator's feature or list size does not fit ``features`` and ``top_n``, or
            ``data_dir`` was converted with another protocol or other held-out files.
    """
    simulator, _ = load_simulator(simulator_path)
    check_compatible(simulator.config, baidu.feature_size(features), top_n, simulator_path)
    if standardization is None:
        beside = os.path.join(os.path.dirname(os.path.abspath(simulator_path)), standardize.STATS_JSON)
        standardization = beside if os.path.isfile(beside) else None
    stats = standardize.Standardizer.load(standardization) if standardization else None
    rows = None
    if data_dir is not None:
        conversion = read_json(os.path.join(data_dir, CONVERSION_JSON), "Baidu-ULTR conversion record")
        if conversion.get("protocol") != "reproducibility":
            raise ValueError("%s was not converted with --protocol reproducibility: no held-out split to score" % data_dir)
        if [os.path.abspath(p) for p in heldout_files] != conversion["heldout_files"]:
            raise ValueError("--heldout_files %s are not the files %s split (%s)"
                             % (list(heldout_files), data_dir, conversion["heldout_files"]))
        rows = heldout_rows(list(heldout_files), conversion["seed"], "test")
    models: List[SessionModel] = [SimulatorModel(simulator), position_ctr(train_files, top_n, population)]
    results = score_files(models, heldout_files, features, top_n, log1p_lexical, population, stats, rows)
    record = {"heldout_files": list(heldout_files), "train_files": list(train_files), "population": population,
              "heldout_half": "test (reproducibility protocol, seed %d)" % conversion["seed"] if rows is not None else "all",
              "standardization": standardization, "models": results}
    atomic_write_text(os.path.join(out_dir, RESULT_FILES[population]), json.dumps(record, indent=1) + "\n")
    return results


def main(argv: Sequence[str] = None) -> None:
    """Console script ``ultra-multr-baidu-click-ll``."""
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
    parser.add_argument("--standardization", default=None,
                        help="the standardisation statistics (default: feature_standardization.json beside --simulator)")
    parser.add_argument("--data_dir", default=None,
                        help="a data directory converted with --protocol reproducibility: score its test half only")
    args = parser.parse_args(argv)
    split = lambda text: baidu.log_files([p for p in text.split(";") if p.strip()])  # noqa: E731
    results = evaluate(args.simulator, split(args.train_files), split(args.heldout_files), args.out, args.features,
                       args.top_n, not args.no_log1p, args.population, args.standardization, args.data_dir)
    for name, values in results.items():
        print("%-16s held-out click log-likelihood %.4f per session, perplexity %.4f (%d sessions)"
              % (name, values["log_likelihood"], values["perplexity"], values["sessions"]))


if __name__ == "__main__":
    main()
