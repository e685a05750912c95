"""How well does the MULTR user simulator model clicks?  A held-out report.

For one split of a ULTRA data directory, every query shows the top N of its
initial list.  Training and held-out click sessions come from click logs or
are sampled (seeded) from a known click model.  The report then

1. trains the MULTR user simulator on the training sessions with MULTR's
   own trainer and settings (:func:`ultra_multr.click_models.evaluation.fit_simulator`:
   a share of them held out for early stopping; ``--simulator_hparams``
   takes MULTR's ``simulator_*`` names and defaults), or loads one with
   ``--simulator_checkpoint``, e.g. the one MULTR saved beside its ranker;
2. fits a position-based model and a cascade model on the same training
   sessions by maximum likelihood (with a weak prior that also serves unseen
   query-document pairs);
3. scores every model on the held-out sessions: click-through rate per
   position (observed vs predicted), log-likelihood and perplexity per
   position and overall, a reliability diagram; with sampled sessions also
   the true click model, the best any model can do in expectation.

With ``--heldout_order random`` (sampled sessions only) every held-out
session shows its query's displayed documents in its own uniformly random
order (seeded, as MULTR's re-ranked term does), clicked by the true click
model on that order; the models, still trained on logged-order sessions
only, are scored on those orders: how well they extrapolate to re-rankings.

Definitions are in :mod:`ultra_multr.click_models.evaluation`: every model is
scored by ``P(c_t | clicks above t)`` (for PBM that is its marginal);
overall perplexity is the mean of the per-position perplexities.

Click logs are text files, one session per line: ``qid c_1 c_2 ... c_k``
with 0/1 clicks on positions 1..k <= N of that query's displayed list
(positions after k are not clicked); a click on a position that shows no
document is an error.

Writes into ``--out`` (each file atomically): ``simulator_report.md`` (the
tables), ``simulator_report.json`` (every number), ``calibration.png`` and,
when it trained one, ``simulator.ckpt`` (usable by
:class:`ultra_multr.click_models.ultra.SimulatorClickModel`).

CLI (also installed as ``ultra-multr-simulator-report``)::

    python -m ultra_multr.experiments.simulator_report --data_dir out/mq2008/Fold1 \\
        --click_model settings/click_models/cascade_eps0.1_ymax2.json \\
        --train_sessions 100000 --heldout_sessions 20000 --out out/report
    python -m ultra_multr.experiments.simulator_report --data_dir out/mq2008/Fold1 \\
        --click_model settings/click_models/cascade_eps0.1_ymax2.json \\
        --simulator_checkpoint MODEL/ultra_multr.MULTR.simulator.ckpt \\
        --heldout_order random --out out/report_random
    python -m ultra_multr.experiments.simulator_report --data_dir DATA \\
        --train_clicks train.clicks --heldout_clicks heldout.clicks --out out/report
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import os
import sys
import time
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ultra_multr.click_models.evaluation import (
    KnownClickModel,
    QueryLists,
    SessionModel,
    Sessions,
    SimulatorModel,
    fit_cascade,
    fit_pbm,
    fit_simulator,
    observed_ctr,
    score_models,
)
from ultra_multr.config import format_hparams, parse_hparams
from ultra_multr.files import atomic_write_file, atomic_write_text
from ultra_multr.randomization import random_permutations
from ultra_multr.simulator import SimulatorTrainingConfig, check_compatible, save_simulator

logger = logging.getLogger(__name__)

PROG = "ultra-multr-simulator-report"
REPORT_MD = "simulator_report.md"
REPORT_JSON = "simulator_report.json"
CALIBRATION_PNG = "calibration.png"
SIMULATOR_CKPT = "simulator.ckpt"
#: Sessions sampled per call (bounds memory when the click model reads features).
SAMPLE_CHUNK = 4096
#: Reliability bins with fewer predictions are left out of the plot (not the JSON): too noisy to read.
MIN_PLOTTED_BIN = 30
TRUE_MODEL = "true click model"
SIMULATOR = "MULTR simulator"
#: --heldout_order: the displayed order, or a uniformly random one per session.
LOGGED, RANDOM = "logged", "random"
HELDOUT_ORDERS = (LOGGED, RANDOM)


# -- inputs ----------------------------------------------------------------------


def read_query_lists(data_dir: str, split: str, list_size: int) -> tuple:
    """The displayed lists (top ``list_size`` of each initial list) of a split.

    Read with ULTRA's reader, which drops queries without a relevant
    document, as ULTRA's training does.

    Returns:
        (QueryLists, qids [Q]).

    Raises:
        FileNotFoundError: naming the missing file.
    """
    from ultra_multr.experiments.evaluate import read_split
    from ultra_multr.feeds.arrays import query_arrays

    for path in (os.path.join(data_dir, "settings.json"), os.path.join(data_dir, split, split + ".init_list")):
        if not os.path.isfile(path):
            raise FileNotFoundError("%s: no such file (is --data_dir a ULTRA data directory with split %r?)"
                                    % (path, split))
    with contextlib.redirect_stdout(io.StringIO()):  # ULTRA's reader prints progress
        data = read_split(data_dir, split)
    arrays = query_arrays(data, list_size)
    mask = torch.from_numpy(arrays.mask)
    features = torch.from_numpy(arrays.features[np.where(arrays.mask, arrays.doc_ids, 0)])
    lists = QueryLists(
        features=features * mask[..., None],
        labels=torch.from_numpy(arrays.labels).double(),
        mask=mask,
    )
    return lists, list(data.qids)


def read_click_log(path: str, qids: Sequence[str], lists: QueryLists) -> Sessions:
    """Sessions from a click-log file (format in the module docstring).

    Raises:
        ValueError: naming ``path:line`` for an unknown qid, a value other
            than 0/1, too many positions or a click where nothing is shown.
    """
    index = {qid: q for q, qid in enumerate(qids)}
    queries, sessions = [], []
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            where = "%s:%d" % (path, number)
            qid, values = fields[0], fields[1:]
            if qid not in index:
                raise ValueError(
                    "%s: query %r is not among the %d queries of the data (ULTRA's reader drops queries "
                    "without a relevant document)" % (where, qid, len(index))
                )
            if len(values) > lists.n_positions:
                raise ValueError("%s: %d clicks for a list of %d positions" % (where, len(values), lists.n_positions))
            if any(v not in ("0", "1") for v in values):
                raise ValueError("%s: clicks must be 0 or 1, got %r" % (where, " ".join(values)))
            clicks = [float(v) for v in values] + [0.0] * (lists.n_positions - len(values))
            q = index[qid]
            shown = lists.mask[q].tolist()
            bad = [t + 1 for t, c in enumerate(clicks) if c and not shown[t]]
            if bad:
                raise ValueError("%s: click at position %d, but query %s shows only %d documents"
                                 % (where, bad[0], qid, sum(shown)))
            queries.append(q)
            sessions.append(clicks)
    if not sessions:
        raise ValueError("%s: no sessions" % path)
    return Sessions(query=torch.tensor(queries, dtype=torch.long), clicks=torch.tensor(sessions, dtype=torch.float32))


def sample_sessions(
    click_model: Any, lists: QueryLists, n_sessions: int, generator: torch.Generator, reorder: bool = False
) -> Tuple[Sessions, Optional[torch.Tensor]]:
    """``n_sessions`` sessions on uniformly drawn queries from an
    :class:`ultra_multr.click_models.ultra.UltraClickModel`.

    With ``reorder`` each session shows its query's documents in a uniformly
    random order of its own (padding stays at the tail).

    Returns:
        (sessions, order): without ``reorder`` the sessions are on ``lists``
        and ``order`` is None; with it ``order`` [S, N] int64 holds each
        session's slots by position and its clicks [S, N] are by position,
        i.e. on ``lists.rows(sessions.query, order)``.
    """
    queries, orders, clicks = [], [], []
    for start in range(0, n_sessions, SAMPLE_CHUNK):
        query = torch.randint(lists.n_queries, (min(SAMPLE_CHUNK, n_sessions - start),), generator=generator)
        order = random_permutations(lists.mask[query], 1, generator)[:, 0] if reorder else None
        shown = lists.rows(query, order)
        features = shown.features if click_model.needs_features else None
        sampled = click_model.sample_clicks(shown.labels, shown.mask, features, generator)
        queries.append(query)
        orders.append(order)
        clicks.append(torch.where(shown.mask, sampled.float(), 0.0))
    sessions = Sessions(query=torch.cat(queries), clicks=torch.cat(clicks))
    return sessions, torch.cat(orders) if reorder else None


def load_simulator_checkpoint(path: str, lists: QueryLists):
    """A saved simulator that fits the lists' feature size and length.

    Raises:
        FileNotFoundError / ValueError: naming the checkpoint (and both sizes).
    """
    from ultra_multr.click_models.ultra import SimulatorClickModel

    if not os.path.isfile(path):
        raise FileNotFoundError("simulator checkpoint %s: no such file" % path)
    simulator = SimulatorClickModel(path).simulator
    check_compatible(simulator.config, lists.features.shape[2], lists.n_positions, "simulator checkpoint %s" % path)
    return simulator


def known_session_model(click_model: Any) -> Optional[SessionModel]:
    """The true model's exact scorer, for the click models that have one."""
    from ultra_multr.click_models.ultra import LabelClickModel, SimulatorClickModel

    if isinstance(click_model, LabelClickModel):
        return KnownClickModel(click_model.model, TRUE_MODEL)
    if isinstance(click_model, SimulatorClickModel):
        model = SimulatorModel(click_model.simulator)
        model.name = TRUE_MODEL
        return model
    logger.warning("no exact likelihood for %s: the report has no true-model row", type(click_model).__name__)
    return None


# -- the report --------------------------------------------------------------------


def _seeds(seed: int, n: int) -> List[int]:
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(n)]


def build_report(
    data_dir: str,
    out_dir: str,
    split: str = "train",
    list_size: int = 10,
    click_model_json: Optional[str] = None,
    train_clicks: Optional[str] = None,
    heldout_clicks: Optional[str] = None,
    train_sessions: int = 100000,
    heldout_sessions: int = 20000,
    seed: int = 0,
    simulator_checkpoint: Optional[str] = None,
    training: SimulatorTrainingConfig = SimulatorTrainingConfig(),
    pbm_iterations: int = 200,
    prior_strength: float = 1.0,
    ctr_samples: int = 200,
    heldout_order: str = LOGGED,
) -> Dict[str, Any]:
    """Build the report, write its files into ``out_dir`` and return its JSON dict.

    Sessions come from ``click_model_json`` (sampled) or from both
    ``train_clicks`` and ``heldout_clicks`` (logs).  ``heldout_order`` is
    one of :data:`HELDOUT_ORDERS` (see the module docstring).

    Raises:
        ValueError / FileNotFoundError: bad input, naming the culprit.
    """
    logs = (train_clicks, heldout_clicks)
    if (click_model_json is None) != all(logs) or (click_model_json is not None and any(logs)):
        raise ValueError("give either a click model JSON or both a training and a held-out click log")
    if heldout_order not in HELDOUT_ORDERS:
        raise ValueError("--heldout_order must be one of %s, got %r" % (HELDOUT_ORDERS, heldout_order))
    if heldout_order == RANDOM and click_model_json is None:
        raise ValueError("--heldout_order random needs sessions sampled from --click_model: "
                         "a click log has no clicks on orders it did not show")
    if list_size < 1:
        raise ValueError("list_size must be >= 1, got %d" % list_size)
    started = time.time()
    lists, qids = read_query_lists(data_dir, split, list_size)
    source = "%s%s (%d queries)" % (os.path.join(data_dir, ""), split, lists.n_queries)
    # A given checkpoint is checked before anything slow happens.
    simulator = load_simulator_checkpoint(simulator_checkpoint, lists) if simulator_checkpoint else None
    train_seed, heldout_seed, simulator_seed, ctr_seed = _seeds(seed, 4)
    true_model, order = None, None
    if click_model_json is not None:
        from ultra_multr.click_models.ultra import load_click_model_file

        click_model = load_click_model_file(click_model_json, what="click model JSON")
        if bool(lists.mask.any()):
            click_model.check_max_label(float(lists.labels[lists.mask].max()), source)
        train, _ = sample_sessions(click_model, lists, train_sessions, torch.Generator().manual_seed(train_seed))
        heldout, order = sample_sessions(click_model, lists, heldout_sessions,
                                         torch.Generator().manual_seed(heldout_seed), heldout_order == RANDOM)
        true_model = known_session_model(click_model)
        sessions_info = {"click_model": os.path.abspath(click_model_json), "seed": seed}
    else:
        train, heldout = read_click_log(train_clicks, qids, lists), read_click_log(heldout_clicks, qids, lists)
        sessions_info = {
            "train_clicks": os.path.abspath(train_clicks), "heldout_clicks": os.path.abspath(heldout_clicks)
        }
    sessions_info.update(train=len(train), heldout=len(heldout), heldout_order=heldout_order)
    heldout_lists, shown_query = lists, heldout.query
    if order is not None:
        heldout_lists, heldout = one_list_per_session(lists, heldout, order)
    logger.info("%d training and %d held-out sessions on %s", len(train), len(heldout), source)

    if simulator is not None:
        simulator_info: Dict[str, Any] = {"checkpoint": os.path.abspath(simulator_checkpoint)}
    else:
        generator = torch.Generator().manual_seed(simulator_seed)
        simulator, fit = fit_simulator(lists, train, training, generator)
        checkpoint = os.path.join(out_dir, SIMULATOR_CKPT)
        simulator_info = {"checkpoint": checkpoint, "training": asdict(training), "fit": asdict(fit)}
        save_simulator(checkpoint, simulator, dict(simulator_info, data=source, sessions=sessions_info))

    # With one list per held-out session, sample about as many sessions in all as per query otherwise.
    ctr_per_list = ctr_samples if order is None else math.ceil(ctr_samples * lists.n_queries / len(heldout))
    simulator_model = SimulatorModel(simulator, ctr_per_list, torch.Generator().manual_seed(ctr_seed))
    models: List[SessionModel] = [
        simulator_model,
        fit_pbm(lists, train, pbm_iterations, prior_strength),
        fit_cascade(lists, train, prior_strength),
    ]
    if true_model is not None:
        models.insert(0, true_model)
    if order is not None:
        models = [model.for_rows(shown_query, order) for model in models]
    scores = score_models(models, heldout_lists, heldout)
    report = {
        "data": {"data_dir": os.path.abspath(data_dir), "split": split, "queries": lists.n_queries,
                 "list_size": list_size},
        "sessions": sessions_info,
        "simulator": dict(simulator_info, config=asdict(simulator.config)),
        "baselines": {"pbm_iterations": pbm_iterations, "prior_strength": prior_strength},
        "ctr_samples": ctr_samples,
        "ctr_samples_per_list": ctr_per_list,
        "heldout_sessions_per_position": heldout.mask(heldout_lists).sum(0).tolist(),
        "observed_ctr_per_position": observed_ctr(heldout_lists, heldout),
        "models": [asdict(s) for s in scores],
        "seconds": round(time.time() - started, 1),
    }
    write_outputs(report, out_dir)
    return report


def one_list_per_session(lists: QueryLists, sessions: Sessions, order: torch.Tensor) -> Tuple[QueryLists, Sessions]:
    """Sessions shown in their own orders ([S, N], see :func:`sample_sessions`)
    as sessions on S lists, row s being what session s showed."""
    rows = torch.arange(len(sessions), device=sessions.query.device)
    return lists.rows(sessions.query, order), Sessions(query=rows, clicks=sessions.clicks)


def perplexity_gap(report: Dict[str, Any], model: Dict[str, Any]) -> Optional[float]:
    """Relative overall perplexity above the true model's (0.02 = 2 % higher); None without a true model."""
    true = [m for m in report["models"] if m["name"] == TRUE_MODEL]
    if not true:
        return None
    return model["perplexity"] / true[0]["perplexity"] - 1.0


def _fmt(value: Optional[float], digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "%.*f" % (digits, value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


HELDOUT_ORDER_TEXT = {
    LOGGED: "Held-out sessions show each query's list in its logged (displayed) order, as training sessions do.",
    RANDOM: "Held-out sessions show each query's displayed documents in a uniformly random order drawn per session "
    "(seeded), clicked by the true click model on that order; the models were trained on logged-order sessions "
    "only (`--heldout_order random`).",
}


def format_markdown(report: Dict[str, Any]) -> str:
    """The report's tables as Markdown."""
    data, sessions = report["data"], report["sessions"]
    positions = ["%d" % (t + 1) for t in range(data["list_size"])]
    source = sessions.get("click_model") or "%s / %s" % (sessions.get("train_clicks"), sessions.get("heldout_clicks"))
    lines = [
        "# User simulator report",
        "",
        "Data: `%s`, split `%s` (%d queries, top %d of each initial list). Sessions: %d training, %d held-out, "
        "from `%s`." % (data["data_dir"], data["split"], data["queries"], data["list_size"], sessions["train"],
                        sessions["heldout"], source),
        "",
        HELDOUT_ORDER_TEXT[sessions["heldout_order"]],
        "",
        "Held-out scores of P(click at t | clicks above t) (PBM: its marginal). Log-likelihood in nats; "
        "perplexity per position = 2^-(mean log2 P), overall = mean over positions (lower is better, 1 is perfect).",
        "",
    ]
    has_true = any(m["name"] == TRUE_MODEL for m in report["models"])
    header = ["model", "log-likelihood / session", "perplexity"] + (["vs true"] if has_true else [])
    rows = []
    for model in report["models"]:
        gap = perplexity_gap(report, model)
        row = [model["name"], _fmt(model["log_likelihood"]), _fmt(model["perplexity"])]
        rows.append(row + (["%+.2f %%" % (100 * gap)] if has_true else []))
    lines += _table(header, rows)
    for title, key, digits in (
        ("Perplexity per position", "perplexity_per_position", 4),
        ("Log-likelihood per position (nats)", "log_likelihood_per_position", 4),
        ("Click-through rate per position", "ctr_per_position", 4),
    ):
        rows = [[m["name"]] + [_fmt(v, digits) for v in m[key]] for m in report["models"]]
        if key == "ctr_per_position":
            rows.insert(0, ["observed"] + [_fmt(v, digits) for v in report["observed_ctr_per_position"]])
        lines += ["", "### " + title, ""] + _table(["model"] + positions, rows)
    return "\n".join(lines) + "\n"


def plot_calibration(report: Dict[str, Any], path: str) -> None:
    """CTR per position (observed vs predicted) and a reliability diagram, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_position, reliability) = plt.subplots(1, 2, figsize=(11, 4.2))
    positions = np.arange(1, report["data"]["list_size"] + 1)
    by_position.plot(positions, report["observed_ctr_per_position"], "ko-", linewidth=2, label="observed")
    for model in report["models"]:
        by_position.plot(positions, model["ctr_per_position"], "--", marker=".", label=model["name"])
        bins = [b for b in model["reliability"] if b["count"] >= MIN_PLOTTED_BIN]
        reliability.plot([b["predicted"] for b in bins], [b["observed"] for b in bins], marker="o", label=model["name"])
    by_position.set_xlabel("position")
    by_position.set_ylabel("click-through rate")
    by_position.set_xticks(positions)
    by_position.set_title("held-out CTR per position")
    reliability.plot([0, 1], [0, 1], color="grey", linewidth=1, label="perfect")
    reliability.set_xlabel("predicted P(click | clicks above)")
    reliability.set_ylabel("observed click frequency")
    reliability.set_title("reliability (10 bins of >= %d predictions)" % MIN_PLOTTED_BIN)
    for axis in (by_position, reliability):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    try:
        atomic_write_file(path, lambda tmp: figure.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(figure)


def write_outputs(report: Dict[str, Any], out_dir: str) -> None:
    """simulator_report.md, simulator_report.json and calibration.png, each atomically."""
    atomic_write_text(os.path.join(out_dir, REPORT_JSON), json.dumps(report, indent=1) + "\n")
    atomic_write_text(os.path.join(out_dir, REPORT_MD), format_markdown(report))
    plot_calibration(report, os.path.join(out_dir, CALIBRATION_PNG))


# -- command line ------------------------------------------------------------------


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", required=True, help="ULTRA data directory")
    parser.add_argument("--split", default="train", help="split whose queries the sessions are on (default: train)")
    parser.add_argument("--list_size", type=int, default=10, help="N, positions shown (default 10)")
    parser.add_argument("--click_model", help="click-model JSON to sample sessions from (simulation)")
    parser.add_argument("--train_clicks", help="click log of the training sessions")
    parser.add_argument("--heldout_clicks", help="click log of the held-out sessions")
    parser.add_argument("--train_sessions", type=int, default=100000, help="sessions sampled for training")
    parser.add_argument("--heldout_sessions", type=int, default=20000, help="sessions sampled for scoring")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    parser.add_argument("--simulator_checkpoint", help="score this simulator instead of training one")
    parser.add_argument(
        "--simulator_hparams", default="",
        help="simulator network and training, MULTR's names and defaults, e.g. "
        "'simulator_steps=3000,simulator_learning_rate=0.003'; defaults: %s"
        % format_hparams(SimulatorTrainingConfig()),
    )
    parser.add_argument("--pbm_iterations", type=int, default=200, help="EM iterations of the PBM")
    parser.add_argument("--prior_strength", type=float, default=1.0, help="pseudo-observations of the baselines' prior")
    parser.add_argument("--ctr_samples", type=int, default=200, help="sessions per query for the simulator's CTR "
                        "(random held-out order: as many in all, over the held-out sessions' lists)")
    parser.add_argument(
        "--heldout_order", choices=HELDOUT_ORDERS, default=LOGGED,
        help="order the held-out sessions show: the logged one (default) or a uniformly random one per session "
        "(only with --click_model)",
    )
    parser.add_argument("--out", required=True, help="output directory")
    return parser


def main(argv: Sequence[str] = None) -> int:
    """Command-line entry point; returns the exit code (2 on bad input)."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        for name in ("train_sessions", "heldout_sessions", "ctr_samples", "pbm_iterations"):
            if getattr(args, name) < 1:
                raise ValueError("--%s must be >= 1, got %d" % (name, getattr(args, name)))
        training = parse_hparams(SimulatorTrainingConfig, args.simulator_hparams, source="--simulator_hparams")
        report = build_report(
            args.data_dir, args.out, args.split, args.list_size, args.click_model, args.train_clicks,
            args.heldout_clicks, args.train_sessions, args.heldout_sessions, args.seed, args.simulator_checkpoint,
            training, args.pbm_iterations, args.prior_strength, args.ctr_samples, args.heldout_order,
        )
    except (ValueError, OSError) as error:
        print("%s: error: %s" % (PROG, error), file=sys.stderr)
        return 2
    print(format_markdown(report))
    print("written to %s in %.1f s" % (os.path.abspath(args.out), report["seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
