"""The Baidu-ULTR benchmark's click metrics on held-out sessions, for any trained click model, one file in memory.

Each held-out session is its own list: its documents at their logged positions (a gap the release's writer
left is a rank never shown, scored nowhere), its logged clicks.  A model gives ``ln P(c_r = 1)`` at every
shown rank, and :mod:`ultra_multr.click_metrics` scores it:

* ``click_nll``: the benchmark's click metric (ultr-reproducibility's ``nll``): per session the mean binary
  cross-entropy of its shown documents, then the mean over sessions (nats);
* ``perplexity`` and ``perplexity_per_rank``: CLAX's per-rank perplexity and its mean over ranks;
* ``log_likelihood``: ours, kept beside them: the mean over sessions of the summed log-likelihood.

The models:

* a ranker with its examination (``--model_dir`` and ``--setting_file`` of a main.py training by any of our
  algorithms with one: Naive, IPS, DLA, PAL, MULTR, ...): ``P(c_r) = e_r * sigmoid(score)``, ``e_r`` recorded
  beside the checkpoint for its step (:mod:`ultra_multr.algorithms.examination`);
* ``MULTR simulator`` (``--simulator``): the user simulator MULTR trained, ``P(c_r | the session's clicks above
  r)`` (so its perplexity is CLAX's conditional perplexity);
* ``position CTR``: the training sessions' click-through rate per logged position, ``(clicks + 1) / (shown + 2)``
  (a rank whose training sessions had no click is not certain to get none), the floor any click model should
  beat.

Two populations of sessions (``population``): ``all`` (the benchmark's), and ``clicked``, the sessions with a
click in the first N positions (the floor fitted on the training files' clicked sessions too).  A MULTR
simulator trained on main.py's default click stream saw only sessions with a click (``check_validation=True``
skips the others unless the feed keeps them, :mod:`ultra_multr.feeds.baidu`): it over-predicts clicks on
``all`` by construction.

Features are standardised as the model was trained (:mod:`ultra_multr.click_logs.standardize`): with the
statistics in its main.py ``--model_dir`` (``feature_standardization.json``, which the feed writes), else none,
or those of ``--standardization``.

With ``--data_dir`` of a data directory converted with ``--protocol reproducibility``, only the test half of
the held-out sessions is scored (ultr-reproducibility's click test; the other half is main.py's validation),
by :func:`ultra_multr.click_logs.baidu_convert.heldout_rows`.

``python -m ultra_multr.click_logs.baidu_click_ll [--simulator M/ultra_multr.MULTR.simulator.ckpt]
[--model_dir M --setting_file M/settings.json] --train_files 'parts/part-[123]_split-*.feather'
--heldout_files 'parts/part-0_split-*.feather' --out O [--population clicked] [--data_dir D]``
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np
import torch

from ultra_multr.algorithms.examination import checkpoint_examination
from ultra_multr.click_metrics import ClickMetrics, ranker_log_click
from ultra_multr.compat.model_dir import checkpoint_path
from ultra_multr.experiments.evaluate import load_ranker
from ultra_multr.files import atomic_write_text, read_json
from ultra_multr.progress import progress
from ultra_multr.simulator.checkpoint import check_compatible, load_simulator
from ultra_multr.click_logs import baidu, standardize
from ultra_multr.click_logs.baidu_convert import CONVERSION_JSON, heldout_rows
from ultra_multr.click_logs.baidu_evaluate import score_annotations

RESULT_JSON = "click_log_likelihood.json"
#: population -> the result file's name
RESULT_FILES = {"all": RESULT_JSON, "clicked": "click_log_likelihood_clicked.json"}
#: Sessions per forward pass of the simulator (bounds memory).
SIMULATOR_CHUNK = 4096


class ClickPredictor(Protocol):
    """A click model scored on logged sessions."""

    name: str
    #: N, the ranks it predicts
    n_ranks: int

    def log_click(self, sessions: baidu.Sessions) -> torch.Tensor:
        """[S, N] float64 ln P(c_r = 1) at every rank of every session (given its clicks above r, for a model
        whose clicks depend on them)."""


@dataclasses.dataclass
class RankerClicks:
    """A trained ranker and its examination [N]: ``P(c_r) = e_r * sigmoid(score)``."""

    name: str
    model: torch.nn.Module
    examination: torch.Tensor

    @property
    def n_ranks(self) -> int:
        return int(self.examination.shape[0])

    def log_click(self, sessions: baidu.Sessions) -> torch.Tensor:
        return ranker_log_click(torch.from_numpy(score_annotations(self.model, sessions)), self.examination)


@dataclasses.dataclass
class SimulatorClicks:
    """A trained user simulator: ``P(c_r | the session's clicks above r)``."""

    simulator: torch.nn.Module
    name: str = "MULTR simulator"

    @property
    def n_ranks(self) -> int:
        return int(self.simulator.config.list_size)

    def log_click(self, sessions: baidu.Sessions) -> torch.Tensor:
        self.simulator.eval()
        features, mask = torch.from_numpy(sessions.features), torch.from_numpy(sessions.mask)
        clicks = torch.from_numpy(sessions.clicks)
        parts = []
        with torch.no_grad():
            for start in range(0, len(sessions), SIMULATOR_CHUNK):
                rows = slice(start, start + SIMULATOR_CHUNK)
                logits = self.simulator.click_logits(features[rows], mask[rows], clicks[rows])
                parts.append(torch.nn.functional.logsigmoid(logits.double()))
        return torch.cat(parts) if parts else torch.zeros(mask.shape, dtype=torch.float64)


@dataclasses.dataclass
class PositionCTR:
    """The click-through rate per rank [N] of the training sessions."""

    ctr: torch.Tensor
    name: str = "position CTR"

    @property
    def n_ranks(self) -> int:
        return int(self.ctr.shape[0])

    def log_click(self, sessions: baidu.Sessions) -> torch.Tensor:
        return torch.log(self.ctr.double()).expand(len(sessions), -1)


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


def position_ctr(paths: Sequence[str], top_n: int, population: str = "all") -> PositionCTR:
    """The ``position CTR`` model of the training files' ``population``: ``(clicks + 1) / (shown + 2)`` per
    position (one file at a time)."""
    clicks, shown = np.zeros(top_n), np.zeros(top_n)
    for sessions in sessions_of(paths, "lexical", top_n, True, population):
        clicks += sessions.clicks.sum(0)
        shown += sessions.mask.sum(0)
    return PositionCTR(torch.from_numpy((clicks + 1.0) / (shown + 2.0)))


def score_files(models: Sequence[ClickPredictor], paths: Sequence[str], features: str, top_n: int,
                log1p_lexical: bool = True, population: str = "all",
                stats: Optional[standardize.Standardizer] = None,
                rows: Optional[Dict[str, np.ndarray]] = None) -> Dict[str, Dict]:
    """Each model's :meth:`ClickMetrics.as_dict <ultra_multr.click_metrics.ClickMetrics.as_dict>` over the
    ``population`` sessions of ``paths`` (those of ``rows`` when given), their first ``top_n`` ranks."""
    totals = {model.name: ClickMetrics(top_n) for model in models}
    for sessions in sessions_of(paths, features, top_n, log1p_lexical, population, stats, rows):
        clicks, mask = torch.from_numpy(sessions.clicks), torch.from_numpy(sessions.mask)
        for model in models:
            totals[model.name].add(model.log_click(sessions), clicks, mask)
    return {name: total.as_dict() for name, total in totals.items()}


def ranker_clicks(settings: dict, model_dir: str, feature_size: int) -> RankerClicks:
    """The ranker main.py saved in ``model_dir`` (``settings``: the settings it trained with) with the examination
    recorded for its step, named after its learning algorithm."""
    checkpoint = checkpoint_path(model_dir, settings["learning_algorithm"])
    examination = torch.from_numpy(checkpoint_examination(checkpoint))
    return RankerClicks(settings["learning_algorithm"], load_ranker(settings, model_dir, feature_size), examination)


def evaluate(simulator_path: Optional[str], train_files: Sequence[str], heldout_files: Sequence[str], out_dir: str,
             features: str = "lexical", top_n: Optional[int] = None, log1p_lexical: bool = True,
             population: str = "all", standardization: Optional[str] = None, data_dir: Optional[str] = None,
             ranker: Optional[Tuple[dict, str]] = None) -> Dict[str, Dict]:
    """Score the simulator (when given), the ranker (when given) and the position CTR on the ``population``
    sessions of ``heldout_files``; writes ``out_dir/`` :data:`RESULT_FILES` ``[population]``.

    Args:
        top_n: N, the ranks scored (None: the models', the simulator's list size or the examination's length).
        standardization: the statistics' JSON (None: the one in the model's directory, else none).
        data_dir: a data directory converted with ``--protocol reproducibility``: score only the test half
            of the held-out sessions (its ``heldout_files`` must be ``heldout_files``).
        ranker: (the settings main.py trained with, its ``--model_dir``).

    Raises:
        ValueError: no model and no ``top_n``; a model whose feature or list size does not fit ``features``
            and N; ``data_dir`` converted with another protocol or other held-out files; a ranker without a
            recorded examination.
    """
    models: List[ClickPredictor] = []
    model_dir = None
    if simulator_path is not None:
        models.append(SimulatorClicks(load_simulator(simulator_path)[0]))
        model_dir = os.path.dirname(os.path.abspath(simulator_path))
    if ranker is not None:
        models.append(ranker_clicks(ranker[0], ranker[1], baidu.feature_size(features)))
        model_dir = ranker[1]
    if top_n is None:
        if not models:
            raise ValueError("no model to take N from: give top_n")
        top_n = min(model.n_ranks for model in models)
    for model in models:
        if isinstance(model, SimulatorClicks):
            check_compatible(model.simulator.config, baidu.feature_size(features), top_n, simulator_path)
        elif model.n_ranks < top_n:
            raise ValueError("%s's examination covers %d ranks, fewer than the %d scored"
                             % (model.name, model.n_ranks, top_n))
    if standardization is None and model_dir is not None:
        beside = os.path.join(model_dir, standardize.STATS_JSON)
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
    models.append(position_ctr(train_files, top_n, population))
    results = score_files(models, heldout_files, features, top_n, log1p_lexical, population, stats, rows)
    record = {"heldout_files": list(heldout_files), "train_files": list(train_files), "population": population,
              "heldout_half": "test (reproducibility protocol, seed %d)" % conversion["seed"] if rows is not None else "all",
              "standardization": standardization, "ranks": top_n, "models": results}
    atomic_write_text(os.path.join(out_dir, RESULT_FILES[population]), json.dumps(record, indent=1) + "\n")
    return results


def main(argv: Sequence[str] = None) -> None:
    """Console script ``ultra-multr-baidu-click-ll``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulator", default=None, help="MULTR's simulator checkpoint (in main.py's --model_dir)")
    parser.add_argument("--model_dir", default=None, help="main.py's --model_dir of a trained ranker to score")
    parser.add_argument("--setting_file", default=None, help="the settings that ranker trained with")
    parser.add_argument("--train_files", required=True, help="glob patterns of the training click files, ';'-separated")
    parser.add_argument("--heldout_files", required=True, help="glob patterns of the held-out click files")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--features", default="lexical", choices=baidu.FEATURE_SETS)
    parser.add_argument("--top_n", type=int, default=None, help="ranks scored (default: the models')")
    parser.add_argument("--no_log1p", action="store_true")
    parser.add_argument("--population", choices=sorted(RESULT_FILES), default="all",
                        help="all held-out sessions, or those with a click")
    parser.add_argument("--standardization", default=None,
                        help="the standardisation statistics (default: feature_standardization.json in the model's "
                             "directory)")
    parser.add_argument("--data_dir", default=None,
                        help="a data directory converted with --protocol reproducibility: score its test half only")
    args = parser.parse_args(argv)
    if (args.model_dir is None) != (args.setting_file is None):
        parser.error("--model_dir and --setting_file go together")
    split = lambda text: baidu.log_files([p for p in text.split(";") if p.strip()])  # noqa: E731
    ranker = (read_json(args.setting_file), args.model_dir) if args.model_dir else None
    results = evaluate(args.simulator, split(args.train_files), split(args.heldout_files), args.out, args.features,
                       args.top_n, not args.no_log1p, args.population, args.standardization, args.data_dir, ranker)
    for name, values in results.items():
        print("%-20s click NLL %.4f, perplexity %.4f, log-likelihood %.4f per session (%d sessions)"
              % (name, values["click_nll"], values["perplexity"], values["log_likelihood"], values["sessions"]))


if __name__ == "__main__":
    main()
