"""A training feed that replays the logged sessions of Baidu-ULTR files, for main.py.

:class:`BaiduSessionFeed` is a ``train_input_feed`` for MULTR and every
baseline: each batch is ``batch_size`` logged sessions, each fed at its
logged positions (slot i = the document logged at position i + 1; a gap the
release's writer left in the positions is a padded slot, so the documents
after it keep their rank), with its logged clicks; nothing is simulated.  It reads the log
itself (:mod:`ultra_multr.click_logs.baidu`), one file at a time: memory is bounded
by one file, not by the log.  The files are visited in a seeded order, each
file's sessions in a seeded permutation; after the last file a new pass
starts (new orders from the same generator).

main.py still reads a ``--data_dir``: ``python -m ultra_multr.click_logs.baidu_convert``
writes the annotated queries as its valid/test splits and a train *stub*:
the first sessions of the log as ULTRA lists (their clicks as labels).  The
feed does not read the stub's lists, but uses it as the set of *session
buckets* (log session i of file f falls into stub list
``(f * 1000003 + i) mod Q``): a :func:`ultra_multr.feeds.arrays.query_subset` view
of the stub, as MULTR builds to hold sessions out of its user simulator,
restricts the feed to the sessions of the view's buckets.

What it shares with :class:`ultra_multr.feeds.ultre.UltreSessionFeed`
(hyper-parameters and ``generator``, ``logged_sessions_per_list``, a batch's
input feed and its count in the click budget) is their base,
:class:`~ultra_multr.feeds.session_replay.SessionReplayFeed`.  Evaluation goes
through ULTRA's ``DirectLabelFeed`` on the converted annotations, so
``get_next_batch`` refuses.  A batch's ``rank_list_idxs``
are its session ids, ``file index * BUCKET_FILE_STRIDE + session in the file`` (sessions:
runs of ``query_no``, numbered in file order).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np
import torch

from ultra_multr.compat import runtime
from ultra_multr.config import Off, knob, require
from ultra_multr.feeds.arrays import QueryArrays
from ultra_multr.progress import ENV as PROGRESS_ENV, Progress
from ultra_multr.click_logs import baidu, standardize
from ultra_multr.feeds.session_replay import SessionReplayFeed

#: ``clickless`` choices: sessions without a click left out where a caller asks for clicks, or kept.
CLICKLESS = ("skip", "keep")
#: Multiplier of the file index in a session's bucket number.
BUCKET_FILE_STRIDE = 1000003
#: Statistics fitted by feeds of this process (MULTR builds several feeds of one log): key -> Standardizer.
_FITTED: dict = {}
#: (files, features) whose files :func:`ultra_multr.click_logs.baidu.check_files` passed in this process.
_CHECKED: set = set()


@dataclass(frozen=True)
class BaiduSessionFeedHParams:
    """Hyper-parameters of :class:`BaiduSessionFeed`.

    Attributes:
        log_files: glob patterns of the click files, separated by ';'
            (e.g. ``/data/baidu/parts/part-[123]_split-*.feather``).
        features: "lexical", "embedding" or "both"; must give the data
            directory's ``feature_size``.
        log1p_lexical: scale the lexical features by sign(x) log(1 + |x|)
            (the converter must have used the same).
        seed: seed of the file and session orders.
        standardize: per-feature standardisation (:mod:`ultra_multr.click_logs.standardize`): the path of the
            statistics the converter wrote (``<data_dir>/feature_standardization.json``; the converter's
            ``main_settings.json`` names it), ``fit`` (default: fit them on ``log_files``, as the converter
            does) or ``none`` (the features as read).
        clickless: sessions without a click in the first N positions: ``skip`` (the default: main.py asks for
            lists with a click, ``check_validation``, and so does every phase that draws as main.py does) or
            ``keep`` (every session, whatever the caller asks: for the losses that learn from a session without
            a click, e.g. PAL's click cross-entropy and MULTR's imputed clicks; MULTR's simulator then trains
            on them too).
    """

    log_files: str = ""
    features: str = "lexical"
    log1p_lexical: bool = True
    seed: int = 0
    standardize: str = "fit"
    clickless: str = knob("skip", inert_when=Off("clickless", "skip"))

    def __post_init__(self) -> None:
        require(bool(self.log_files.strip()), "log_files is required: glob patterns of Baidu-ULTR click files, ';'-separated")
        require(self.features in baidu.FEATURE_SETS,
                "features=%r: expected one of %s" % (self.features, ", ".join(baidu.FEATURE_SETS)))
        require(self.clickless in CLICKLESS,
                "clickless=%r: expected one of %s" % (self.clickless, ", ".join(CLICKLESS)))

    @property
    def patterns(self) -> List[str]:
        return [p.strip() for p in self.log_files.split(";") if p.strip()]


class BaiduSessionFeed(SessionReplayFeed):
    """Replays logged Baidu-ULTR sessions (see the module docstring). Hyper-parameters: :class:`BaiduSessionFeedHParams`."""

    HPARAMS = BaiduSessionFeedHParams

    def __init__(self, model: Any, batch_size: int, hparam_str: str) -> None:
        super().__init__(model, batch_size, hparam_str)
        self.files = baidu.log_files(self.hparams.patterns)
        checked = (tuple(self.files), self.hparams.features)
        if checked not in _CHECKED:  # every file, before the first update; once per process (MULTR has several feeds)
            baidu.check_files(self.files, self.hparams.features, "clicks")
            _CHECKED.add(checked)
        width = baidu.feature_size(self.hparams.features)
        if width != int(model.feature_size):
            raise ValueError(
                "%s: features=%s gives %d features per document, but the data directory's settings.json says "
                "feature_size=%d; convert the annotations with the same --features"
                % (type(self).__name__, self.hparams.features, width, int(model.feature_size)))
        self.rank_list_size = int(model.rank_list_size)
        self._file_order: List[int] = []
        self._sessions: Optional[baidu.Sessions] = None
        self._buckets = np.zeros(0, dtype=np.int64)
        self._order = np.zeros(0, dtype=np.int64)
        self._cursor = 0
        self._passes, self._meter = 0, None
        self.standardizer = self._standardizer()

    def _standardizer(self) -> Optional[standardize.Standardizer]:
        """The statistics of the ``standardize`` hparam (None: ``none``), copied into main.py's --model_dir.

        Raises:
            ValueError: statistics fitted under other reader settings, or for another feature size.
        """
        choice = self.hparams.standardize.strip()
        if choice.lower() == "none":
            return None
        if choice.lower() == "fit":
            key = (tuple(self.files), self.hparams.features, self.rank_list_size, self.hparams.log1p_lexical)
            if key not in _FITTED:
                _FITTED[key] = standardize.fit_files(self.files, self.hparams.features, self.rank_list_size,
                                                     self.hparams.log1p_lexical)
            stats = _FITTED[key]
        else:
            stats = standardize.Standardizer.load(choice)
        stats.check_reader("%s standardize=%s" % (type(self).__name__, choice), self.hparams.features,
                           self.hparams.log1p_lexical)
        args = runtime.main_args()
        if args is not None and getattr(args, "model_dir", None):
            os.makedirs(args.model_dir, exist_ok=True)
            target = os.path.join(args.model_dir, standardize.STATS_JSON)
            if not (os.path.isfile(target) and standardize.Standardizer.load(target).same_as(stats)):
                stats.save(target)
        return stats

    def _next_file(self) -> None:
        """Load the next file of the pass (a new seeded pass after the last) and permute its sessions."""
        if self._meter is not None:
            self._meter.update(1)  # the previous file is done
        if not self._file_order:
            self._file_order = torch.randperm(len(self.files), generator=self.generator).tolist()
            if self._meter is not None:
                self._meter.close()
            self._passes += 1
            # a log line per file with the rate and the time left in the pass (no tqdm bar inside main.py's loop)
            self._meter = Progress(len(self.files), "%s: pass %d over the log" % (type(self).__name__, self._passes),
                                   "files", every_s=0.0,
                                   mode="off" if os.environ.get(PROGRESS_ENV) == "off" else "lines")
        index = self._file_order.pop(0)
        self._sessions = None  # one file in memory at a time
        sessions = baidu.read_sessions(self.files[index], self.hparams.features, self.rank_list_size,
                                       self.hparams.log1p_lexical, "clicks")
        self._sessions = sessions if self.standardizer is None else self.standardizer.apply_sessions(sessions)
        self._buckets = self._buckets_of(sessions, np.arange(len(sessions), dtype=np.int64))
        self._order = torch.randperm(len(sessions), generator=self.generator).numpy()
        self._cursor = 0

    @staticmethod
    def _allowed_buckets(data_set: Any) -> Tuple[int, Optional[np.ndarray]]:
        """(Q of the stub, the stub lists a view of it (of a view ...) allows; None: the stub itself, all)."""
        allowed = None
        while getattr(data_set, "subset_of", None) is not None:
            queries = np.asarray(data_set.subset_queries)
            allowed = queries if allowed is None else queries[allowed]
            data_set = data_set.subset_of
        return len(data_set.initial_list), allowed

    def get_batch(self, data_set: Any, check_validation: bool = False, data_format: str = "ULTRA"):
        """``batch_size`` logged sessions, in the feed's seeded order (with ``check_validation`` and
        ``clickless=skip``: those with a click in the first N positions); ``data_set`` (the stub, or a view of
        it) selects the session buckets.

        Raises:
            ValueError: a whole pass over the log yields no eligible session.
        """
        self._check_format(data_format)
        n_buckets, allowed = self._allowed_buckets(data_set)
        check_validation = check_validation and self.hparams.clickless == "skip"
        chosen: List[Tuple[baidu.Sessions, np.ndarray]] = []
        n_chosen, n_read, files_without = 0, 0, 0
        while n_chosen < self.batch_size:
            if self._sessions is None or self._cursor >= len(self._order):
                if files_without > len(self.files):
                    raise ValueError("%s: no session of %d file(s) (%s ...) is eligible (%s)" % (
                        type(self).__name__, len(self.files), self.files[0],
                        "a click in the first %d positions" % self.rank_list_size if check_validation else "any"))
                self._next_file()
                files_without += 1
            take = self._order[self._cursor:self._cursor + self.batch_size - n_chosen]
            self._cursor += len(take)
            keep = np.ones(len(take), dtype=bool)
            if allowed is not None:
                keep &= np.isin(self._buckets[take] % n_buckets, allowed)
            n_read += int(keep.sum())
            if check_validation:
                keep &= self._sessions.clicks[take].sum(axis=1) > 0
            if keep.any():
                chosen.append((self._sessions, take[keep]))
                n_chosen += int(keep.sum())
                files_without = 0
        features = np.concatenate([s.features[idx] for s, idx in chosen])
        mask = np.concatenate([s.mask[idx] for s, idx in chosen])
        n_rows = mask.size
        arrays = QueryArrays(
            data_set=data_set,
            doc_ids=np.where(mask, np.arange(n_rows).reshape(mask.shape), -1),
            labels=np.concatenate([s.clicks[idx] for s, idx in chosen]),
            mask=mask,
            features=features.reshape(n_rows, -1),
        )
        input_feed, info_map = self.replay(arrays, np.arange(len(mask)), n_read)
        info_map["rank_list_idxs"] = np.concatenate([self._buckets_of(s, idx) for s, idx in chosen]).tolist()
        return input_feed, info_map

    def distinct_sessions(self, data_set: Any) -> int:
        """The logged sessions of the buckets ``data_set`` (the stub or a view of it) allows, counted from the
        files' session numbers: what MULTR holds out of its simulator is this many sessions, not the view's lists."""
        n_buckets, allowed = self._allowed_buckets(data_set)
        total = 0
        for index, path in enumerate(self.files):
            ids = index * BUCKET_FILE_STRIDE + np.arange(baidu.session_count(path), dtype=np.int64)
            total += int(ids.size if allowed is None else np.isin(ids % n_buckets, allowed).sum())
        return total

    def _buckets_of(self, sessions: baidu.Sessions, rows: np.ndarray) -> np.ndarray:
        """[R] int64 the session ids ``file index * BUCKET_FILE_STRIDE + session`` (bucket = id mod Q)."""
        return self.files.index(sessions.path) * BUCKET_FILE_STRIDE + rows

    def get_next_batch(self, index: int, data_set: Any, check_validation: bool = False, data_format: str = "ULTRA"):
        raise NotImplementedError(
            "%s is a training feed; evaluate with ultra.input_layer.DirectLabelFeed on the annotations "
            "converted by `python -m ultra_multr.click_logs.baidu_convert`" % type(self).__name__)

    def get_data_by_index(self, data_set: Any, index: int, check_validation: bool = False):
        return self.get_next_batch(index, data_set, check_validation)
