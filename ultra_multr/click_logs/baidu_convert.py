"""Baidu-ULTR files -> the ULTRA data directory main.py needs beside :class:`~ultra_multr.feeds.baidu.BaiduSessionFeed`.

``python -m ultra_multr.click_logs.baidu_convert --annotations parts/validation.feather
--log_files 'parts/part-[123]_split-*.feather' --out data/baidu --features lexical``

writes ``<out>/``:

- ``valid/`` and ``test/``, by ``--protocol``:

  * ``annotations`` (default, ours): the annotated queries (graded 0-4), split
    by a seeded permutation of their ``query_md5`` (``--valid_share`` to valid,
    ``--seed`` default 0), every document of a query in the file's order;
  * ``reproducibility`` (the published protocol of Hager et al.,
    philipphager/ultr-reproducibility at 78d8060, ``main.py``): the sessions of
    the held-out click files (``--heldout_files``, part 0) split 50/50 by
    :func:`heldout_split` (``--seed`` default 381, their ``random_state``);
    ``valid/`` holds the first half (their validation clicks: its sessions as
    lists with their clicks as labels), the second half is their click
    log-likelihood test (``baidu_click_ll --data_dir``), and ``test/`` holds
    every annotated query (their ranking metrics use all annotations);
    main.py selects the checkpoint by the model's own loss on ``valid/``'s
    clicks (``objective_metric`` ``click_loss_neg``; the annotations protocol:
    ``ndcg_10``);
- ``train/``: a stub of ``--stub_lists`` lists, the first sessions with a click
  of the first click file (top ``--top_n`` positions, clicks as labels).  main.py must read
  a training split; the feed replays the log instead and uses the stub's lists
  as session buckets (see :mod:`ultra_multr.feeds.baidu`).  main.py's lists are as long
  as the longest list it reads: when no list of the stub or of ``valid/`` holds N
  documents (gaps close up there), the stub's first list is extended by
  placeholder documents (no feature, label 0) to N, so main.py can show N positions;
- ``settings.json``: the feature size of ``--features`` and max_label 4;
- ``baidu_conversion.json``: the annotations file, features, scaling, share
  and seed, from which :mod:`ultra_multr.click_logs.baidu_evaluate` rebuilds the
  same split;
- ``main_settings.json``: main.py's ``--setting_file`` for MULTR on this log
  (:data:`MAIN_SETTINGS`, the feed's hparams naming the log files as absolute
  patterns, with the converter's features and scaling); change
  ``learning_algorithm`` for a baseline.

Features are those the feed reads (same ``--features`` and lexical scaling), standardised per
feature with statistics fitted on ``--log_files`` (:mod:`ultra_multr.click_logs.standardize`;
``<out>/feature_standardization.json``, named in ``main_settings.json``; ``--no_standardize``: off).
``--dataset`` names the features as ultr-reproducibility's ``data=`` does (:data:`UPSTREAM_DATASETS`).

Positions: ``--top_n`` N, the positions of a session kept (the feed's and main.py's list size);
``auto`` (the ``reproducibility`` protocol's default) is the deepest logged position of the click
files, at most :data:`MAX_POSITIONS` (ultr-reproducibility's ``positions: 50``); ``annotations``
keeps its default of 10.  The files given as ``--annotations`` are read as annotations and those
of ``--log_files`` / ``--heldout_files`` as click sessions, whatever their names.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from ultra_multr.compat.settings_check import CLICK_LOSS_OBJECTIVE
from ultra_multr.data.ultra_format import RankedQuery, ultra_data_dir, write_settings, write_split
from ultra_multr.files import atomic_write_text
from ultra_multr.click_logs import baidu, standardize

PROG = "python -m ultra_multr.click_logs.baidu_convert"
MAX_LABEL = 4
#: What the converter records in the data directory (read by the evaluation).
CONVERSION_JSON = "baidu_conversion.json"
#: main.py's settings file the converter writes into the data directory.
MAIN_SETTINGS_JSON = "main_settings.json"
#: Its content, less ``train_input_hparams`` and ``objective_metric`` (:data:`OBJECTIVES`) (settings/multr_dla.json
#: with the session-replay feed).
MAIN_SETTINGS = {
    "train_input_feed": "ultra_multr.feeds.baidu.BaiduSessionFeed",
    "valid_input_feed": "ultra.input_layer.DirectLabelFeed",
    "valid_input_hparams": "",
    "test_input_feed": "ultra.input_layer.DirectLabelFeed",
    "test_input_hparams": "",
    "ranking_model": "ultra.ranking_model.DNN",
    "ranking_model_hparams": "hidden_layer_sizes=[512,256,128]",
    "learning_algorithm": "ultra_multr.MULTR",
    "learning_algorithm_hparams": "learning_rate=0.05,sample_num=8,simulator_steps=10000,seed=0",
    "metrics": ["ndcg", "err"],
    "metrics_topn": [1, 3, 5, 10],
}


def valid_queries(query_md5: np.ndarray, valid_share: float, seed: int) -> np.ndarray:
    """[S] bool: the annotated rows whose query falls into valid (a seeded share of the distinct ``query_md5``).

    Raises:
        ValueError: ``valid_share`` outside (0, 1) or fewer than 2 distinct queries.
    """
    if not 0.0 < valid_share < 1.0:
        raise ValueError("valid_share must be in (0, 1), got %r" % valid_share)
    keys = np.unique(query_md5)
    if len(keys) < 2:
        raise ValueError("%d annotated queries; need 2 or more for valid and test" % len(keys))
    shuffled = keys[np.random.default_rng(seed).permutation(len(keys))]
    n_valid = min(len(keys) - 1, max(1, int(round(valid_share * len(keys)))))
    return np.isin(query_md5, shuffled[:n_valid])


#: --protocol choices.
PROTOCOLS = ("annotations", "reproducibility")
#: Each protocol's model selection (main.py's ``objective_metric``): ours nDCG@10 of the annotated valid queries;
#: ultr-reproducibility's early stopping on each model's own loss on its validation clicks.
OBJECTIVES = {"annotations": "ndcg_10", "reproducibility": CLICK_LOSS_OBJECTIVE}
#: Each protocol's default --seed: ours 0; ultr-reproducibility's config/config.yaml ``random_state: 381``.
DEFAULT_SEEDS = {"annotations": 0, "reproducibility": 381}
#: ``--top_n`` that reads N from the click files (:func:`positions_of`).
AUTO = "auto"
#: Each protocol's default --top_n: ours the top 10; ultr-reproducibility's every position (see :data:`AUTO`).
DEFAULT_TOP_N = {"annotations": 10, "reproducibility": AUTO}
#: The most positions ``auto`` keeps: ultr-reproducibility's ``config/model/*.yaml`` ``positions: 50`` (the size of
#: its position embedding, position 0 its padding).
MAX_POSITIONS = 50
#: ultr-reproducibility's ``data=`` names (``config/data/*.yaml`` at 78d8060): the release each reads and its
#: ``features`` (``bert``: the embedding, ``ltr``: the 12 lexical features).
UPSTREAM_DATASETS = {
    "baidu": ("philipphager/baidu-ultr_baidu-mlm-ctr", "embedding"),
    "uva": ("philipphager/baidu-ultr_uva-mlm-ctr", "embedding"),
    "ltr": ("philipphager/baidu-ultr_baidu-mlm-ctr", "lexical"),
}
#: The id prefix of the placeholder documents that extend the stub's first list to N positions.
PLACEHOLDER = "placeholder-"


def positions_of(paths: Sequence[str]) -> tuple:
    """(N, the deepest logged position): N = the deepest position of the click files ``paths``, at most
    :data:`MAX_POSITIONS` (one column read per file)."""
    deepest = max(baidu.deepest_position(path) for path in paths)
    return min(deepest, MAX_POSITIONS), deepest


def with_width(queries: List[RankedQuery], width: int) -> List[RankedQuery]:
    """``queries``, the first extended by placeholder documents (no feature, label 0) to ``width`` documents when
    none holds that many (main.py's lists are as long as the longest it reads)."""
    if not queries or max(len(q.doc_ids) for q in queries) >= width:
        return queries
    first = queries[0]
    extra = width - len(first.doc_ids)
    return [RankedQuery(
        qid=first.qid,
        doc_ids=first.doc_ids + ["%s%d" % (PLACEHOLDER, k) for k in range(extra)],
        features=np.concatenate([first.features, np.zeros((extra, first.features.shape[1]), first.features.dtype)]),
        labels=np.concatenate([first.labels, np.zeros(extra, first.labels.dtype)]),
        initial_scores=np.arange(width, 0, -1, dtype=np.float64),
    )] + queries[1:]


def heldout_split(n_sessions: int, seed: int = 381) -> tuple:
    """(validation rows, test rows) of ``n_sessions`` held-out sessions, as ultr-reproducibility splits its
    test clicks: ``random_split(test_clicks, shuffle=True, random_state=seed, test_size=0.5)``, i.e. scikit-learn's
    ``train_test_split`` of ``arange(n)``, whose first part (``train_idx``) becomes ``val_clicks`` and second
    (``test_idx``) ``test_clicks``.  scikit-learn's ShuffleSplit draws ``RandomState(seed).permutation(n)``
    and takes the first ``ceil(n / 2)`` as test, the rest as train; this reproduces it with numpy alone
    (the rows in that permutation's order).

    Raises:
        ValueError: fewer than 2 sessions.
    """
    if n_sessions < 2:
        raise ValueError("%d held-out sessions; need 2 or more for validation and test" % n_sessions)
    permutation = np.random.RandomState(seed).permutation(n_sessions)
    n_test = int(math.ceil(0.5 * n_sessions))
    return permutation[n_test:], permutation[:n_test]


def heldout_rows(paths: Sequence[str], seed: int, half: str) -> Dict[str, np.ndarray]:
    """path -> sorted rows (sessions of that file) in ``half`` ("validation" or "test") of :func:`heldout_split`
    over the sessions of ``paths`` numbered in the order given, file after file (the loader's order)."""
    if half not in ("validation", "test"):
        raise ValueError("half must be validation or test, got %r" % half)
    counts = [baidu.session_count(path) for path in paths]
    chosen = heldout_split(sum(counts), seed)[0 if half == "validation" else 1]
    in_half = np.zeros(sum(counts), dtype=bool)
    in_half[chosen] = True
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return {path: np.flatnonzero(in_half[offsets[i]:offsets[i + 1]]) for i, path in enumerate(paths)}


def ranked_queries(sessions: baidu.Sessions, rows: Iterable[int], prefix: str = "r") -> List[RankedQuery]:
    """ULTRA lists of the given rows: qid = ``query_md5``, documents in logged order (a gap in the positions
    closes up: ULTRA's lists have no holes), ``clicks`` as labels."""
    queries = []
    for row in rows:
        shown = sessions.mask[row]
        n = int(shown.sum())
        queries.append(RankedQuery(
            qid=str(sessions.query_md5[row]),
            doc_ids=["%s%d-%s" % (prefix, row, text) for text in sessions.text_md5[row, shown]],
            features=sessions.features[row, shown],
            labels=sessions.clicks[row, shown],
            initial_scores=np.arange(n, 0, -1, dtype=np.float64),
        ))
    return queries


def convert(annotations: str, log_patterns: Sequence[str], out: str, features: str = "lexical",
            top_n: Union[int, str, None] = None, valid_share: float = 0.5, stub_lists: int = 100,
            log1p_lexical: bool = True, seed: Optional[int] = None, standardize_features: bool = True,
            protocol: str = "annotations", heldout_patterns: Sequence[str] = (), dataset: Optional[str] = None
            ) -> Dict[str, int]:
    """Write the data directory (see the module docstring); returns lists per split (``valid_with_click``: those
    of valid with a click, ``top_n``: N, ``deepest_position``: the click files' deepest position).

    Args:
        features: the features (ignored when ``dataset`` names them).
        top_n: N, or :data:`AUTO` (None: :data:`DEFAULT_TOP_N` of ``protocol``).
        seed: the split's seed (None: :data:`DEFAULT_SEEDS` of ``protocol``).
        standardize_features: fit per-feature standardisation on the log files and apply it everywhere.
        protocol: one of :data:`PROTOCOLS`.
        heldout_patterns: the held-out click files (``reproducibility`` only).
        dataset: one of :data:`UPSTREAM_DATASETS` (recorded, and its features used), or None.

    Raises:
        ValueError: ``valid_share`` outside (0, 1), fewer than 2 annotated queries (held-out sessions), an
            unknown protocol, held-out files missing or given to the other protocol, or a bad file
            (:class:`~ultra_multr.click_logs.baidu.BaiduSchemaError`).
    """
    if protocol not in PROTOCOLS:
        raise ValueError("protocol=%r: expected one of %s" % (protocol, ", ".join(PROTOCOLS)))
    if (protocol == "reproducibility") != bool(heldout_patterns):
        raise ValueError("--heldout_files (the part-0 click files) is required with --protocol reproducibility "
                         "and used by it alone")
    if dataset is not None:
        if dataset not in UPSTREAM_DATASETS:
            raise ValueError("dataset=%r: expected one of %s" % (dataset, ", ".join(UPSTREAM_DATASETS)))
        features = UPSTREAM_DATASETS[dataset][1]
    seed = DEFAULT_SEEDS[protocol] if seed is None else int(seed)
    train_files = baidu.log_files(log_patterns)
    heldout = baidu.log_files(heldout_patterns) if heldout_patterns else []
    # an empty or broken file is named before anything is written
    baidu.check_files(train_files + heldout, features, "clicks")
    top_n = DEFAULT_TOP_N[protocol] if top_n is None else top_n
    deepest = None
    if top_n == AUTO:
        top_n, deepest = positions_of(train_files + heldout)
    top_n = int(top_n)
    if top_n < 1:
        raise ValueError("top_n must be >= 1 or %r, got %d" % (AUTO, top_n))
    stats = standardize.fit_files(train_files, features, top_n, log1p_lexical) if standardize_features else None
    scaled = (lambda s: stats.apply_sessions(s)) if stats else (lambda s: s)  # noqa: E731
    graded = scaled(baidu.read_sessions(annotations, features, None, log1p_lexical, "annotations"))
    logged = scaled(baidu.read_sessions(train_files[0], features, top_n, log1p_lexical, "clicks"))
    # ULTRA drops lists without a positive label: the stub's sessions have a click.
    stub = ranked_queries(logged, np.flatnonzero(logged.clicks.sum(axis=1) > 0)[:stub_lists])
    counts: Dict[str, int] = {"top_n": top_n}
    record = {"annotations": os.path.abspath(annotations), "features": features, "log1p_lexical": log1p_lexical,
              "protocol": protocol, "seed": seed, "top_n": top_n}
    if deepest is not None:
        counts["deepest_position"] = record["deepest_position"] = deepest
    if dataset is not None:
        record["dataset"], record["release"] = dataset, UPSTREAM_DATASETS[dataset][0]
    if protocol == "annotations":
        try:
            in_valid = valid_queries(graded.query_md5, valid_share, seed)
        except ValueError as error:
            raise ValueError("%s: %s" % (annotations, error)) from None
        valid = ranked_queries(graded, np.flatnonzero(in_valid))
        counts["test"] = write_split(out, "test", ranked_queries(graded, np.flatnonzero(~in_valid)))
        record["valid_share"] = valid_share
    else:
        validation = heldout_rows(heldout, seed, "validation")
        valid = []
        for index, path in enumerate(heldout):
            sessions = scaled(baidu.read_sessions(path, features, top_n, log1p_lexical, "clicks"))
            valid += ranked_queries(sessions, validation[path], "h%d-" % index)
        counts["test"] = write_split(out, "test", ranked_queries(graded, range(len(graded))))
        record["heldout_files"] = [os.path.abspath(path) for path in heldout]
    counts["valid"] = write_split(out, "valid", valid)
    counts["valid_with_click"] = sum(int(q.labels.sum() > 0) for q in valid)
    longest_valid = max((len(q.doc_ids) for q in valid if q.labels.sum() > 0), default=0)  # those ULTRA keeps
    counts["train"] = write_split(out, "train", stub if longest_valid >= top_n else with_width(stub, top_n))
    standardize_hparam = "none"
    if stats is not None:
        standardize_hparam = os.path.abspath(stats.save(os.path.join(out, standardize.STATS_JSON)))
        record["standardization"] = standardize_hparam
    write_settings(out, baidu.feature_size(features), MAX_LABEL)
    atomic_write_text(os.path.join(out, CONVERSION_JSON), json.dumps(record, indent=1) + "\n")
    patterns = ";".join(os.path.abspath(os.path.expanduser(p)) for p in log_patterns)
    feed_hparams = "log_files=%s,features=%s,log1p_lexical=%s,seed=0,standardize=%s" % (
        patterns, features, str(log1p_lexical).lower(), standardize_hparam)
    settings = dict(MAIN_SETTINGS, train_input_hparams=feed_hparams, objective_metric=OBJECTIVES[protocol])
    atomic_write_text(os.path.join(out, MAIN_SETTINGS_JSON), json.dumps(settings, indent=1) + "\n")
    return counts


def train_through_main_py(
    main_py: str, data_dir: str, model_dir: str, learning_algorithm: str, hparams: str, ranking_model_hparams: str,
    batch_size: int, steps: int, checkpoint_every: int, cutoff: int = 10,
):
    """Train on a converted data directory with ULTRA's main.py (its ``main_settings.json`` with the given
    algorithm and ranker), one thread; main.py's output goes to ``<model_dir>/main_py.log``.

    Returns:
        (the settings used, main.py's ``subprocess.CompletedProcess``).
    """
    import subprocess

    with open(os.path.join(data_dir, MAIN_SETTINGS_JSON)) as handle:
        settings = json.load(handle)
    settings.update(learning_algorithm=learning_algorithm, learning_algorithm_hparams=hparams,
                    ranking_model_hparams=ranking_model_hparams)
    os.makedirs(model_dir, exist_ok=True)
    setting_file = os.path.join(model_dir, "settings.json")
    atomic_write_text(setting_file, json.dumps(settings, indent=1) + "\n")
    command = [sys.executable, main_py, "--setting_file", setting_file, "--data_dir", ultra_data_dir(data_dir),
               "--model_dir", model_dir, "--output_dir", os.path.join(model_dir, "out") + "/",
               "--batch_size", str(batch_size), "--selection_bias_cutoff", str(cutoff),
               "--max_train_iteration", str(steps), "--steps_per_checkpoint", str(checkpoint_every)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", ULTRA_MULTR_PROGRESS="lines")
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=model_dir)
    atomic_write_text(os.path.join(model_dir, "main_py.log"), done.stdout + "\n--- stderr ---\n" + done.stderr)
    return settings, done


def main(argv: Sequence[str] = None) -> int:
    """Command-line entry point; returns the exit code (2 on bad input)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotations", required=True, help="the release's parts/validation.feather")
    parser.add_argument("--log_files", required=True, help="glob patterns of the click files, ';'-separated")
    parser.add_argument("--out", required=True, help="the data directory to write (main.py --data_dir)")
    parser.add_argument("--features", default="lexical", choices=baidu.FEATURE_SETS)
    parser.add_argument("--dataset", choices=sorted(UPSTREAM_DATASETS), default=None,
                        help="ultr-reproducibility's data= name: ltr (the lexical features of baidu-mlm-ctr), baidu "
                             "or uva (the embedding of baidu-mlm-ctr / uva-mlm-ctr); sets --features")
    parser.add_argument("--top_n", default=None,
                        help="positions per logged session, or auto: the click files' deepest, at most %d "
                             "(default: 10 for annotations, auto for reproducibility)" % MAX_POSITIONS)
    parser.add_argument("--valid_share", type=float, default=0.5, help="share of annotated queries in valid/")
    parser.add_argument("--stub_lists", type=int, default=100, help="lists of the train stub (session buckets)")
    parser.add_argument("--no_log1p", action="store_true", help="keep the lexical features unscaled")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the valid/test split (default: 0 for annotations, 381 for reproducibility)")
    parser.add_argument("--no_standardize", action="store_true",
                        help="no per-feature standardisation (default: fitted on --log_files, applied everywhere)")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="annotations",
                        help="annotations: valid/test = annotated queries split by --valid_share (ours); "
                             "reproducibility: valid = half of --heldout_files' sessions, test = all annotations "
                             "(ultr-reproducibility's)")
    parser.add_argument("--heldout_files", default="",
                        help="glob patterns of the held-out click files (part 0), ';'-separated (reproducibility)")
    args = parser.parse_args(argv)
    if args.top_n not in (None, AUTO) and not args.top_n.isdigit():
        parser.error("--top_n: expected a number or %s, got %r" % (AUTO, args.top_n))
    try:
        counts = convert(args.annotations, [p for p in args.log_files.split(";") if p.strip()], args.out,
                         args.features, args.top_n if args.top_n in (None, AUTO) else int(args.top_n),
                         args.valid_share, args.stub_lists, not args.no_log1p, args.seed, not args.no_standardize,
                         args.protocol, [p for p in args.heldout_files.split(";") if p.strip()], args.dataset)
    except (ValueError, OSError) as error:
        print("%s: error: %s" % (PROG, error), file=sys.stderr)
        return 2
    print(summary_line(ultra_data_dir(args.out), args.protocol, counts))
    return 0


def summary_line(data_dir: str, protocol: str, counts: Dict[str, int]) -> str:
    """What :func:`convert` wrote, in one line (``counts`` as it returns them)."""
    if protocol == "annotations":
        valid = "%d annotated queries" % counts["valid"]
    else:
        valid = "%d held-out sessions (%d with a click; ULTRA's reader keeps only those for main.py's validation)" % (
            counts["valid"], counts["valid_with_click"])
    deepest = (" (the click files' deepest position: %d)" % counts["deepest_position"]
               if "deepest_position" in counts else "")
    return "%s: %d positions%s, train stub %d lists, valid %s, test %d annotated queries" % (
        data_dir, counts["top_n"], deepest, counts["train"], valid, counts["test"])


if __name__ == "__main__":
    sys.exit(main())
