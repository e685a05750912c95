"""ultra_multr.compat.main_py_start: main.py's own arguments and its settings file, refused by name before main.py
reads any data (docs/failures.md).  main.py runs in this process, as the runner's seeded_main runs it (runpy, as
``__main__``): each refusal comes at its first call into ULTRA, so no process is needed."""
from __future__ import annotations

import json
import os
import re

import pytest

from conftest import REPO_ROOT, main_py_in_process, require_ultra

require_ultra()

from ultra_multr.compat.settings_check import SettingsError  # noqa: E402

CASCADE = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")


def write_settings(tmp_path, base="dla_cascade.json", **changes):
    """settings/<base> with a small ranker and the suite's click model, ``changes`` applied (None: key removed)."""
    with open(os.path.join(REPO_ROOT, "settings", base)) as handle:
        settings = json.load(handle)
    settings.update(ranking_model_hparams="hidden_layer_sizes=[16]",
                    train_input_hparams="click_model_json=%s,seed=0" % CASCADE)
    for key, value in changes.items():
        if value is None:
            del settings[key]
        else:
            settings[key] = value
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return str(path)


def refusal_of_main_py(ultra_main, monkeypatch, capsys, args):
    """What ULTRA's main.py, run with ``args`` in this process, raised; asserting it read no split."""
    refused = main_py_in_process(ultra_main, args, monkeypatch)
    out = capsys.readouterr().out
    assert "Reading data in" in out and "Read data from" not in out  # main.py's first read_data call refused it
    return refused


@pytest.mark.parametrize("argument, message", [
    (["--batch_size", "0"], "--batch_size 0: expected 1 or more; below that ULTRA's main.py fails or misreads: its "
                            "feeds draw no list, and its first batch fails (IndexError at 0 in a training"),
    (["--steps_per_checkpoint", "0"], "--steps_per_checkpoint 0: expected 1 or more; below that ULTRA's main.py fails "
                                      "or misreads: it divides by it at every step (ZeroDivisionError at 0"),
    (["--max_list_cutoff", "-2"], "--max_list_cutoff -2: expected 0 or more"),
    (["--test_while_train", "True"], "--test_while_train: ULTRA's main.py cannot test while it trains: it reads the "
                                     "test split with --max_list_cutoff in the place of --click_model_dir"),
    (["--valid_data_prefix", "vaild"], "split 'vaild': neither "),  # before: after the training split's whole read
], ids=["batch_size", "steps_per_checkpoint", "max_list_cutoff", "test_while_train", "valid_data_prefix"])
def test_main_py_arguments_it_fails_on_are_refused_by_name_before_it_reads(
        ultra_main, synthetic_data_dir, tmp_path, monkeypatch, capsys, argument, message):
    """Before: IndexError, ZeroDivisionError (after the first step), IndexError in ULTRA's reader; a negative cutoff
    silently dropped the last documents of every list."""
    model_dir = str(tmp_path / "model")
    args = ["--setting_file", write_settings(tmp_path), "--data_dir", synthetic_data_dir, "--model_dir", model_dir,
            "--max_train_iteration", "2"] + argument
    refused = refusal_of_main_py(ultra_main, monkeypatch, capsys, args)
    assert isinstance(refused, ValueError) and message in str(refused), refused
    assert not os.path.exists(model_dir)


@pytest.mark.parametrize("base, changes, message", [
    ("dla_cascade.json", {"ranking_model": None},
     r"settings file {settings} has no key 'ranking_model'; ULTRA's main.py \(or the learning algorithm "
     r"ultra_multr.DLA\) reads it and would stop with a bare KeyError"),
    ("dla_cascade.json", {"test_input_feed": "ultra.input_layer.DirectLabelFed"},
     r"test_input_feed of settings file {settings}: unknown class of ultra.input_layer 'DirectLabelFed' \(did you mean "
     r"'DirectLabelFeed'\?\); known: .*; main.py would fail on 'ultra.input_layer.DirectLabelFed' with ImportError"),
    ("dla_cascade.json", {"objective_metric": "ndcg@10"},
     r"objective_metric of settings file {settings}: unknown objective 'ndcg@10' \(did you mean 'ndcg_10'\?\); known: "
     r"click_loss_neg, err_1, .*, ndcg_5 \(the validation reports each of metrics x metrics_topn as "
     r"<metric>_<cutoff>\); main.py would never find it and would keep the last checkpoint, not the best"),
    ("dla_cascade.json", {"metrics_topn": ["10"]},
     r"metrics_topn of settings file {settings}: expected a list of positive integers \(cutoffs\), got \['10'\]"),
    ("multr_dla.json", {"metrics": ["ndcg", "er"]},
     r"metrics of settings file {settings}: unknown metric 'er' \(did you mean 'err'\?\); known: arp, dcg, err, map, "
     r"mrr, ndcg, ordered_pair_accuracy, precision; ULTRA's metrics would refuse it at main.py's first validation"),
], ids=["no ranking_model", "a misspelt test_input_feed", "a misspelt objective", "metrics_topn of strings",
        "a misspelt metric with MULTR"])
def test_a_settings_file_main_py_would_fail_on_later_is_refused_before_it_reads(
        ultra_main, synthetic_data_dir, tmp_path, monkeypatch, capsys, base, changes, message):
    """Before: a misspelt objective kept the last checkpoint, exit 0; a misspelt test_input_feed passed the whole
    training and failed at --test_only; a misspelt metric failed at the first validation (with MULTR after its
    simulator's training); metrics_topn ["10"] a TypeError there; no ranking_model a bare KeyError."""
    settings = write_settings(tmp_path, base, **changes)
    args = ["--setting_file", settings, "--data_dir", synthetic_data_dir, "--model_dir", str(tmp_path / "model")]
    refused = refusal_of_main_py(ultra_main, monkeypatch, capsys, args)
    assert isinstance(refused, SettingsError) and re.match(message.format(settings=re.escape(settings)),
                                                           str(refused)), refused
