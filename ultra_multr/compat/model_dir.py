"""main.py's ``--model_dir``: never reuse a ranker checkpoint silently.

ULTRA's ``main.py`` saves the ranker to ``<model_dir>/<learning_algorithm>.ckpt``
and, at every start, loads that file when it exists -- and carries on quietly
when it does not:

* ``--test_only`` without a checkpoint evaluates a randomly initialised ranker
  and exits 0;
* training on a model dir that holds a checkpoint (a killed run restarted, or a
  dir left by other data or settings) loads the ranker weights only and starts
  the step count, the optimizer state, the propensity model and the
  best-validation tracking afresh (``best_perf`` is a local of main.py, so it
  cannot be restored from outside): not a resumption, and not a fresh run.

So when main.py constructs one of our algorithms (:func:`check_model_dir`,
called from ``PluginAlgorithm.__init__``), training refuses a model dir that
already holds the ranker checkpoint and says how to start afresh, and
``--test_only`` refuses a model dir without one.  Training writes an identity
file beside the checkpoint, ``<learning_algorithm>.ckpt.identity.json``: the
fingerprint of the training data and the settings, so that the refusal can say
whether the checkpoint came from other data or settings, and ``--test_only``
can refuse a checkpoint of another ranking model.  Outside main.py (tests,
notebooks) nothing is checked.

A model dir holds one training: main.py names the ranker checkpoint after
the algorithm, so a second algorithm trained into a dir that holds a
(finished) training of another would exit 0, its ``train_log/`` events mixed
with the first's and its session ledger (``session_budget.json``) written
over the first's.  Training refuses a model dir holding the identity file of
another algorithm's training, or a ranker checkpoint that no identity file
accounts for (e.g. of one of ULTRA's own algorithms), naming that training's
algorithm and settings (:func:`other_trainings`); ``--test_only`` without
its checkpoint names them too.

Two more silent failures of main.py are answered here:

* two trainings into one model dir would both run and exit 0, leaving one
  run's checkpoint beside the other run's identity file: training takes
  ``<model_dir>/train.lock`` (:mod:`ultra_multr.files`, the runner's lock)
  for as long as the process lives; a second training is refused naming the
  holder's pid, host and start time, and the lock of a killed training (dead
  pid on this host) is taken over with a warning;
* ``--test_only`` on an empty, truncated or foreign checkpoint fails inside
  main.py's ``torch.load`` with an error that names no file (a bare
  ``EOFError``, ``OSError: [Errno 22]``, a zip-archive error): the
  checkpoint is loaded once here first and such a file is refused by name.
  Whether the checkpoint is that of a finished training is said by
  :mod:`.progress`.
"""
from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
from typing import Dict, List, Optional, Tuple

from ultra_multr.data import checks
from ultra_multr.files import atomic_write_text
from ultra_multr.files import DirLock
from ultra_multr.compat.progress import TrainingProgress, report_progress, training_state

LOGGER = logging.getLogger("ultra_multr")
IDENTITY_SUFFIX = ".identity.json"
#: Held by a main.py training for as long as its process lives.
TRAIN_LOCK_FILE = "train.lock"
#: Settings that define the ranker's shape; --test_only must match them.
MODEL_KEYS = ("ranking_model", "ranking_model_hparams", "feature_size")


class ModelDirError(RuntimeError):
    """A model dir that cannot be used as asked."""


def checkpoint_path(model_dir: str, learning_algorithm: str) -> str:
    """Where main.py saves the ranker: ``<model_dir>/<learning_algorithm>.ckpt``."""
    return os.path.join(model_dir, "%s.ckpt" % learning_algorithm)


def run_identity(args: argparse.Namespace, exp_settings: dict, feature_size: int) -> Dict:
    """What a training run in ``args.model_dir`` is a function of (JSON-ready)."""
    return {
        "data_dir": os.path.abspath(args.data_dir),
        # from the hashes the data checks took while reading (no second read at start-up)
        "data_sha256": checks.data_fingerprint(
            args.data_dir, [args.train_data_prefix, args.valid_data_prefix], args.click_model_dir
        ),
        "click_model_dir": args.click_model_dir,
        "batch_size": args.batch_size,
        "max_list_cutoff": args.max_list_cutoff,
        "feature_size": feature_size,
        "settings": exp_settings,
    }


def _differences(saved: Dict, current: Dict) -> List[str]:
    """Names (``settings.<key>`` for settings) whose values differ."""
    names = []
    for name in sorted(set(saved) | set(current)):
        if name == "settings":
            old, new = saved.get(name) or {}, current.get(name) or {}
            names += ["settings.%s" % k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        elif saved.get(name) != current.get(name):
            names.append(name)
    return names


def _read_identity(path: str) -> Tuple[Optional[Dict], str]:
    """(the identity, "") or (None, why there is none: missing, or unreadable and why)."""
    if not os.path.exists(path):
        return None, "no %s beside it" % os.path.basename(path)
    try:
        with open(path) as handle:
            identity = json.load(handle)
    except (OSError, ValueError) as error:
        return None, "its identity file %s is unreadable (%s: %s)" % (path, type(error).__name__, error)
    if not isinstance(identity, dict):
        return None, "its identity file %s is unreadable (a JSON %s, not an object)" % (path, type(identity).__name__)
    return identity, ""


def _describe_training(identity_file: str) -> str:
    """One phrase for the training an identity file records: its algorithm, settings, data and state."""
    checkpoint = identity_file[: -len(IDENTITY_SUFFIX)]
    identity, no_identity = _read_identity(identity_file)
    if identity is None:
        return "a training recorded in %s, whose settings cannot be read (%s)" % (identity_file, no_identity.replace(
            "its identity file %s is " % identity_file, ""))
    settings = identity.get("settings") or {}
    shown = ", ".join(
        "%s=%r" % (key, settings.get(key)) for key in ("learning_algorithm_hparams", "ranking_model", "ranking_model_hparams")
    )
    state = training_state(checkpoint)[1] if os.path.isfile(checkpoint) else "a training that saved no checkpoint"
    return "the training of %s recorded in %s (%s; data_dir=%r): %s" % (
        settings.get("learning_algorithm"), identity_file, shown, identity.get("data_dir"), state)


def other_trainings(model_dir: str, learning_algorithm: str) -> List[str]:
    """Phrases naming the trainings in ``model_dir`` other than one of ``learning_algorithm``.

    One per identity file ``<A>.ckpt.identity.json`` of another algorithm A
    (its settings, data and whether it finished), and one per ranker
    checkpoint ``*.ckpt`` that no identity file accounts for (neither
    ``<A>.ckpt`` nor a file ``<A>.*.ckpt`` of a recorded algorithm A, such
    as MULTR's simulator): a training of unknown origin, e.g. one of ULTRA's
    own algorithms.
    """
    try:
        names = sorted(os.listdir(model_dir))
    except OSError:  # no dir yet
        return []
    ours = os.path.basename(checkpoint_path(model_dir, learning_algorithm))
    recorded = [name[: -len(IDENTITY_SUFFIX)] for name in names if name.endswith(".ckpt" + IDENTITY_SUFFIX)]
    found = [
        _describe_training(os.path.join(model_dir, name + IDENTITY_SUFFIX))
        for name in recorded
        if name != ours
    ]
    owners = [name[: -len(".ckpt")] for name in recorded]
    for name in names:
        if not name.endswith(".ckpt") or any(name == owner + ".ckpt" or name.startswith(owner + ".") for owner in owners):
            continue
        if name == ours or name.startswith(ours[: -len(".ckpt")] + "."):
            continue  # the current algorithm's (judged by check_model_dir)
        found.append("a ranker checkpoint %s of unknown origin (no %s beside it; e.g. a training of one of ULTRA's "
                     "own algorithms)" % (os.path.join(model_dir, name), name + IDENTITY_SUFFIX))
    return found


def checkpoint_load_problem(checkpoint: str) -> Optional[str]:
    """Why main.py's ``torch.load`` of the ranker checkpoint would fail (None: it loads)."""
    import torch  # main.py has imported it already

    try:
        torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as error:  # torch.load raises EOFError, OSError, RuntimeError, KeyError, ... on bad files
        size = os.path.getsize(checkpoint) if os.path.isfile(checkpoint) else None
        cause = "an empty file (0 bytes)" if size == 0 else "truncated or not a checkpoint (%s bytes)" % size
        return "%s; torch.load said %s: %s" % (
            cause, type(error).__name__, str(error).splitlines()[0] if str(error) else "(no message)")
    return None


#: What to do about a ranker checkpoint that cannot be loaded: one advice, from --test_only and from training alike.
UNLOADABLE_ADVICE = ("Delete %s and train into this --model_dir again (a training killed while saving, or a full "
                     "disk, leaves such a file; a training into a dir that still holds it is refused).")


def check_checkpoint_loads(checkpoint: str) -> None:
    """Load the ranker checkpoint as main.py will; refuse it by name if that fails.

    Raises:
        ModelDirError: an empty, truncated or unreadable file, or no checkpoint at all.
    """
    problem = checkpoint_load_problem(checkpoint)
    if problem is not None:
        raise ModelDirError("--test_only: the ranker checkpoint %s cannot be loaded: %s. %s"
                            % (checkpoint, problem, UNLOADABLE_ADVICE % checkpoint))


def lock_for_training(model_dir: str) -> DirLock:
    """Take ``<model_dir>/train.lock`` until this process exits.

    Raises:
        DirLockError: another training holds it (the message names its pid, host and start time).
    """
    lock = DirLock(os.path.join(model_dir, TRAIN_LOCK_FILE), "main.py training").acquire()
    atexit.register(lock.release)
    return lock


def check_model_dir(
    args: argparse.Namespace, exp_settings: dict, feature_size: int
) -> Optional[TrainingProgress]:
    """Refuse a model dir main.py would misuse; in training, lock it and record the run's identity.

    Args:
        args: main.py's parsed arguments (:func:`ultra_multr.compat.runtime.main_args`).
        exp_settings: the settings dict main.py hands to the algorithm.
        feature_size: the data's number of features.

    Returns:
        In training, the :class:`TrainingProgress` the algorithm must tell
        its steps (None with ``--test_only``).

    Raises:
        ModelDirError: ``--test_only`` without a loadable ranker checkpoint
            or with one of another ranking model; training on a dir holding a
            checkpoint, or a training of another algorithm (:func:`other_trainings`).
        DirLockError: another training holds the model dir.
    """
    model_dir = args.model_dir
    checkpoint = checkpoint_path(model_dir, exp_settings["learning_algorithm"])
    identity_file = checkpoint + IDENTITY_SUFFIX
    if not args.test_only:
        lock_for_training(model_dir)
    saved, no_identity = _read_identity(identity_file)
    if args.test_only:
        if not os.path.isfile(checkpoint):
            others = other_trainings(model_dir, exp_settings["learning_algorithm"])
            raise ModelDirError(
                "--test_only: --model_dir %s holds no ranker checkpoint %s, so main.py would evaluate a randomly "
                "initialised ranker%s. Train into this dir first, or pass the --model_dir of a finished training."
                % (model_dir, os.path.basename(checkpoint),
                   "; it holds %s: --test_only needs the settings file of that training" % "; and ".join(others)
                   if others else "")
            )
        check_checkpoint_loads(checkpoint)
        report_progress(checkpoint)
        if saved is None:
            LOGGER.warning("%s: %s, so which settings trained it cannot be checked", checkpoint, no_identity)
            return None
        current = dict(exp_settings, feature_size=feature_size)
        old = dict(saved.get("settings") or {}, feature_size=saved.get("feature_size"))
        differ = [k for k in MODEL_KEYS if old.get(k) != current.get(k)]
        if differ:
            raise ModelDirError(
                "--test_only: the ranker checkpoint %s was trained with %s; these settings have %s"
                % (
                    checkpoint,
                    ", ".join("%s=%r" % (k, old.get(k)) for k in differ),
                    ", ".join("%s=%r" % (k, current.get(k)) for k in differ),
                )
            )
        return None
    others = other_trainings(model_dir, exp_settings["learning_algorithm"])
    if others:
        raise ModelDirError(
            "--model_dir %s already holds %s. One model dir holds one training: this training of %s would exit 0 "
            "with its train_log/ events mixed with that training's and its session ledger (session_budget.json) "
            "written over that one's. Pass another --model_dir, or delete %s to train there afresh."
            % (model_dir, "; and ".join(others), exp_settings["learning_algorithm"], model_dir)
        )
    current = json.loads(json.dumps(run_identity(args, exp_settings, feature_size)))  # as it reads back
    if os.path.isfile(checkpoint):
        problem = checkpoint_load_problem(checkpoint)
        if problem is not None:  # nothing to evaluate either: the one advice --test_only gives too
            raise ModelDirError("--model_dir %s already holds the ranker checkpoint %s, which cannot be loaded: %s. %s"
                                % (model_dir, checkpoint, problem, UNLOADABLE_ADVICE % checkpoint))
        if saved is None:
            origin = "a ranker checkpoint %s of unknown origin (%s)" % (checkpoint, no_identity)
        else:
            differ = _differences(saved, current)
            origin = (
                "the ranker checkpoint %s of a training on other data or settings (differ: %s)"
                % (checkpoint, ", ".join(differ))
                if differ
                else "the ranker checkpoint %s of an earlier training with the same data and settings: %s"
                % (checkpoint, training_state(checkpoint)[1])
            )
        raise ModelDirError(
            "--model_dir %s already holds %s. main.py would load only the ranker's weights and restart the step "
            "count, the optimizer state, the propensity model and the best-validation tracking, so training cannot "
            "resume from it. To train from scratch, delete %s (or the whole model dir) or pass a new --model_dir; "
            "to evaluate the saved ranker, add --test_only True." % (model_dir, origin, checkpoint)
        )
    atomic_write_text(identity_file, json.dumps(current, indent=1, sort_keys=True) + "\n")
    return TrainingProgress(checkpoint, args.max_train_iteration)
