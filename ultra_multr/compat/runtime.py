"""Run-time helpers that stand between our torch code and ULTRA's objects.

See the table in :mod:`ultra_multr.compat` for which ULTRA defect each helper
handles.  Nothing else in ultra_multr touches ULTRA's internals.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import torch

import ultra

from ultra_multr import tensorboard

LOGGER = logging.getLogger("ultra_multr")

#: What our algorithms return as the train summary.  main.py at 1757587 calls
#: ``train_writer.add_scalars("Training at step %s" % step, summary)``, which
#: opens one new event-file writer per key *and per step*; with an empty dict
#: it opens none.  Training progress is logged through :mod:`logging` instead.
EMPTY_SUMMARY: Dict[str, float] = {}

#: main.py's boolean flags are declared ``type=bool``: any non-empty value,
#: "False" included, parses as True.
_BOOLEAN_MAIN_FLAGS = ("--test_only", "--test_while_train")
_FALSE_WORDS = ("false", "0", "no", "off", "")


def main_args() -> Optional[argparse.Namespace]:
    """The parsed arguments of ULTRA's ``main.py`` when it is the running script.

    main.py parses its command line at module level into ``args``; running as
    a script, that module is ``__main__``.  Returns None elsewhere (tests,
    notebooks), so callers must have a fallback.
    """
    args = getattr(sys.modules.get("__main__"), "args", None)
    if isinstance(args, argparse.Namespace) and hasattr(args, "model_dir"):
        return args
    return None


def main_py_local(name: str) -> Any:
    """A local variable of the running main.py's ``train()`` (None when not called from there).

    main.py keeps its data sets in locals of ``train()``; this finds that
    frame on the caller's stack, so that what main.py has read already is
    not read again.
    """
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    frame = sys._getframe(1)
    while frame is not None:
        if main_file is not None and frame.f_code.co_filename == main_file and frame.f_code.co_name == "train":
            return frame.f_locals.get(name)
        frame = frame.f_back
    return None


#: main.py's integer options that break it below a minimum: (option, minimum, whether only a training reads it,
#: what main.py does below it).
_MAIN_INT_MINIMUMS = (
    ("batch_size", 1, False, "its feeds draw no list, and its first batch fails (IndexError at 0 in a training, an "
                             "empty batch under --test_only)"),
    ("steps_per_checkpoint", 1, True, "it divides by it at every step (ZeroDivisionError at 0; a negative one turns "
                                      "the printed loss and step time negative)"),
    ("max_list_cutoff", 0, False, "ULTRA's reader cuts every list to list[:cutoff], so a negative cutoff drops the "
                                  "last documents of every list"),
)


def check_main_flags(argv: Sequence[str] = None, args: Optional[argparse.Namespace] = None) -> None:
    """Refuse main.py's arguments it reads wrongly or fails on, naming the argument (outside main.py: only ``argv``).

    * ``--test_only False`` style flags, which main.py reads as True (checked on ``argv``, default ``sys.argv``);
    * ``--test_while_train`` switched on: main.py at 1757587 reads the test split with ``--max_list_cutoff`` in
      the place of ``--click_model_dir`` (ULTRA's reader then takes the ULTRE layout and fails), and at the first
      checkpoint iterates ``test_summary.items`` without calling it;
    * the integer options of :data:`_MAIN_INT_MINIMUMS` below their minimum.

    ``args``: main.py's parsed arguments (default: :func:`main_args`, None outside main.py).

    Raises:
        ValueError: naming the argument, its value and what main.py would do with it.
    """
    argv = list(sys.argv if argv is None else argv)
    for i, token in enumerate(argv):
        name, _, value = token.partition("=")
        if name not in _BOOLEAN_MAIN_FLAGS:
            continue
        if not _:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if value.strip().lower() in _FALSE_WORDS:
            raise ValueError(
                "%s %r: ULTRA's main.py parses this flag with type=bool, so any value, "
                "%r included, switches it ON. Leave the flag out to keep it off."
                % (name, value, value)
            )
    args = main_args() if args is None else args
    if args is None:
        return
    if getattr(args, "test_while_train", False) and not args.test_only:
        raise ValueError(
            "--test_while_train: ULTRA's main.py cannot test while it trains: it reads the test split with "
            "--max_list_cutoff in the place of --click_model_dir (so its reader takes the ULTRE layout and fails), "
            "and at its first checkpoint it iterates test_summary.items without calling it (TypeError). Leave the "
            "flag out, and test the trained ranker with main.py --test_only True"
        )
    for option, minimum, training_only, below in _MAIN_INT_MINIMUMS:
        value = getattr(args, option, minimum)
        if value < minimum and not (training_only and args.test_only):
            raise ValueError("--%s %d: expected %d or more; below that ULTRA's main.py fails or misreads: %s"
                             % (option, value, minimum, below))


def mend_output_dir() -> None:
    """Add the ``/`` main.py needs at the end of its ``--output_dir``, saying so (outside main.py: nothing).

    main.py --test_only writes ``args.output_dir + "test.ranklist"`` (string
    concatenation in ``ultra.utils.output_ranklist``): ``--output_dir out``
    would write ``outtest.ranklist`` beside an empty ``out/``.  main.py reads
    ``args.output_dir`` only after constructing the algorithm, so mending the
    parsed arguments here is what it then uses.
    """
    args = main_args()
    if args is not None and args.output_dir and not args.output_dir.endswith(("/", os.sep)):
        mended = args.output_dir + "/"
        if args.test_only:
            prefix = getattr(args, "test_data_prefix", "test")
            LOGGER.warning(
                "--output_dir %r has no trailing '/': ULTRA's main.py would write %s beside an empty %s/; "
                "writing %s instead"
                % (args.output_dir, args.output_dir + prefix + ".ranklist", args.output_dir,
                   mended + prefix + ".ranklist")
            )
        args.output_dir = mended


def write_ranklist_atomically() -> None:
    """Make main.py --test_only write its ranklist atomically (outside main.py, or in training: nothing).

    ULTRA's ``output_ranklist`` opens ``<output_dir><prefix>.ranklist`` and
    writes line by line: on a full disk main.py dies with ``[Errno 28]`` and
    no path, and a 0-byte or partial ranklist stays behind for the next step
    to read.  main.py calls it as ``ultra.utils.output_ranklist`` after
    building the algorithm, so the function it finds there is
    :func:`atomic_output_ranklist` (ULTRA's files are not touched).
    """
    args = main_args()
    if args is not None and args.test_only:
        ultra.utils.output_ranklist = atomic_output_ranklist


def atomic_output_ranklist(data, rerank_scores, output_path: str, file_name: str = "test") -> None:
    """ULTRA's ``output_ranklist``, the same lines, written to a temporary name and renamed into place.

    Raises:
        DiskFullError: the disk filled up (names the ranklist and the free space); nothing is left behind.
    """
    from ultra_multr.files import atomic_write_text

    qid_list_map = ultra.utils.data_utils.generate_ranklist_by_scores(data, rerank_scores)
    lines = [
        "%s Q0 %s %d %s Model\n" % (qid, doc, rank + 1, str(score))
        for qid in data.qids
        for rank, (doc, score) in enumerate(qid_list_map[qid])
    ]
    atomic_write_text(output_path + file_name + ".ranklist", "".join(lines))


def resolve_data_path(path: str, what: str) -> str:
    """Find a file named relative to the CWD *or* to the settings file.

    ULTRA opens click-model JSONs relative to the working directory, so a
    settings file only works from one directory.  We try, in order: the path
    as given (absolute, or relative to the CWD), relative to the directory of
    main.py's ``--setting_file``, and relative to this repository's root.

    Raises:
        FileNotFoundError: naming ``what`` and every place tried.
    """
    candidates = [path]
    if not os.path.isabs(path):
        args = main_args()
        if args is not None and getattr(args, "setting_file", None):
            candidates.append(os.path.join(os.path.dirname(os.path.abspath(args.setting_file)), path))
        repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        candidates.append(os.path.join(repo_root, path))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise FileNotFoundError(
        "%s %r not found; tried: %s" % (what, path, ", ".join(os.path.abspath(c) for c in candidates))
    )


def choose_device(requested: str) -> torch.device:
    """One device per run: "auto" is CUDA when available, else CPU.

    This is the only place that picks a device for our tensors; everything
    else follows ``self.device`` of the algorithm or the device of its inputs.
    The one exception is ULTRA's metric functions, which chose their own
    device at import time (:func:`ultra_metric_device`).
    """
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=%r requested but CUDA is not available" % requested)
    return device


def ultra_metric_device() -> torch.device:
    """The device ULTRA's ranking metrics compute on.

    ``ultra/utils/metrics.py`` sets a module-level ``device`` (CUDA whenever
    CUDA exists) at import time and builds its discount and gain tensors
    there, so the labels and scores handed to ``make_ranking_metric_fn``
    must live on it -- whatever device our model runs on.
    """
    return ultra.utils.metrics.device


def _state_dict_on_cpu(module, state_dict, prefix, local_metadata) -> None:  # type: ignore[no-untyped-def]
    """State-dict hook: CPU copies of the tensors, edited in place.

    Registered with ``_register_state_dict_hook`` (every torch >= 1.13 has
    it; the public ``register_state_dict_post_hook`` needs torch >= 2.5).
    """
    for name, value in state_dict.items():
        if isinstance(value, torch.Tensor):
            state_dict[name] = value.detach().cpu()


def create_ranking_model(exp_settings: dict, feature_size: int, device: torch.device) -> torch.nn.Module:
    """Instantiate ``exp_settings['ranking_model']`` on ``device``.

    The model's ``state_dict()`` holds CPU tensors whatever ``device`` is.
    main.py saves ``model.model.state_dict()`` and reads it back with
    ``torch.load(path)`` and no ``map_location``, which cannot read tensors
    saved from CUDA on a machine without CUDA; CPU tensors load anywhere and
    ``load_state_dict`` copies them onto the model's device.
    """
    model_class = ultra.utils.find_class(exp_settings["ranking_model"])
    model = model_class(exp_settings.get("ranking_model_hparams", ""), feature_size)
    model._register_state_dict_hook(_state_dict_on_cpu)
    return model.to(device)


def score_documents(model: torch.nn.Module, features: torch.Tensor) -> torch.Tensor:
    """Ranking scores for a flat batch of documents.

    Args:
        model: a ULTRA ranking model.
        features: [M, F] on the model's device.

    Returns:
        [M] scores.

    ULTRA's DNN and Linear ``build`` move their input to CUDA whenever CUDA
    exists, whatever device the model is on; both keep their network in
    ``sequential``, which we call directly.  Other models go through ``build``.
    """
    if isinstance(model, (ultra.ranking_model.DNN, ultra.ranking_model.Linear)):
        return model.sequential(features).squeeze(-1)
    return torch.cat(list(model.build([features])), dim=0).reshape(-1)


def ranking_metrics(
    labels: torch.Tensor, scores: torch.Tensor, mask: torch.Tensor, metrics: List[str], cutoffs: List[int]
) -> Dict[str, float]:
    """ULTRA's own metric functions, as ``{"ndcg_10": value, ...}``.

    Args:
        labels: [B, L] graded relevance; scores: [B, L]; mask: [B, L] bool.
    """
    device = ultra_metric_device()
    padded = torch.where(mask, scores, torch.full_like(scores, -1e5)).detach().to(device)
    labels = torch.where(mask, labels, torch.zeros_like(labels)).to(device)
    values: Dict[str, float] = {}
    for metric in metrics:
        results = ultra.utils.make_ranking_metric_fn(metric, list(cutoffs))(labels, padded, None)
        for cutoff, value in zip(cutoffs, results):
            values["%s_%d" % (metric, cutoff)] = float(value)
    return values


def requested_selection_bias_cutoff(exp_settings: dict) -> Optional[int]:
    """The cutoff the user asked main.py for, before main.py clamps it.

    main.py overwrites ``exp_settings['selection_bias_cutoff']`` with
    ``min(cutoff, longest list)`` without a word; we re-read the request from
    the settings file or the command line.  None when not run by main.py.
    """
    import json

    args = main_args()
    if args is None:
        return None
    try:
        with open(args.setting_file) as handle:
            in_file = json.load(handle).get("selection_bias_cutoff")
    except (OSError, ValueError):
        in_file = None
    if in_file is not None:
        return int(in_file)
    return int(args.selection_bias_cutoff) if args.selection_bias_cutoff > 0 else None


def open_training_writer() -> None:
    """Open the TensorBoard writer in main.py's ``<model_dir>/train_log`` (outside main.py: nothing)."""
    args = main_args()
    if args is not None:
        tensorboard.open_writer(os.path.join(args.model_dir, "train_log"))
