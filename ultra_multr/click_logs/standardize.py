"""Per-feature standardisation of click-log features, fitted on the training log (issue 27, item 5).

The Baidu-ULTR lexical features, even after the reader's signed log1p, have
means and spreads that differ by feature (BM25 scores near 0-3, lengths near
3-7).  ULTRA's DNN with its default per-document layer normalisation hides
this; without it (``norm=none``) DLA's propensity model, which MULTR uses,
gave a non-finite loss within five updates on the study's log
(studies/baidu/README.md, ``pbm_noisy_nonorm``).  Standardising each feature
across documents, ``(x - mean) / std`` with the mean and standard deviation of
the *training* log's shown documents, keeps each feature's scale between
documents without the per-document normalisation.

One :class:`Standardizer` is fitted once (:func:`fit_files`, streaming over
the files, one in memory) and applied unchanged to every split:

* ``baidu_convert`` fits it on ``--log_files`` (the training log), writes it as
  ``<data_dir>/feature_standardization.json`` and applies it to the train
  stub and the annotated valid/test queries (or click sessions) it writes;
* :class:`~ultra_multr.feeds.baidu.BaiduSessionFeed` reads that file (its
  ``standardize`` hparam, which the converter fills in) or, given ``fit``,
  fits the same statistics on its own ``log_files``; it applies them to every
  session it feeds and copies them into main.py's ``--model_dir``
  (:data:`STATS_JSON`), so the statistics are stored with the model;
* ``baidu_evaluate`` and ``baidu_click_ll`` apply the copy stored with the
  model (falling back to the data directory's), so test data get the
  training log's transform.

On by default for click logs (the converter and the feed); off for data that
ULTRA's own preparation already normalised (the ULTRA data directories of
``ultra-multr-prepare`` and the ULTRE feeds never standardise).  A constant
feature (standard deviation below :data:`MIN_STD`) is centred only.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Iterable, List, Optional, Sequence

import numpy as np

from ultra_multr.files import atomic_write_text

#: The statistics' file name, in the data directory and in main.py's --model_dir.
STATS_JSON = "feature_standardization.json"
#: A feature whose standard deviation is below this is centred, not scaled.
MIN_STD = 1e-6


@dataclasses.dataclass(frozen=True)
class Standardizer:
    """``(x - mean) / std`` per feature, at shown documents only (padding stays 0).

    Attributes:
        mean, std: [F] float64 over the shown documents of the files fitted on (std 1 where below MIN_STD).
        features, log1p_lexical: the reader's settings the statistics were fitted under.
        fitted_on: the files, in the order read.
        n_documents: shown documents counted.
    """

    mean: np.ndarray
    std: np.ndarray
    features: str
    log1p_lexical: bool
    fitted_on: tuple
    n_documents: int

    def apply(self, values: np.ndarray, mask: Optional[np.ndarray] = None) -> np.ndarray:
        """float32 ``values`` [..., F] standardised; where ``mask`` [...] is False the result is 0."""
        if values.shape[-1] != len(self.mean):
            raise ValueError("standardisation fitted on %d features, got %d" % (len(self.mean), values.shape[-1]))
        out = ((values - self.mean) / self.std).astype(np.float32)
        if mask is not None:
            out[~mask] = 0.0
        return out

    def apply_sessions(self, sessions):
        """A copy of :class:`~ultra_multr.click_logs.baidu.Sessions` with standardised features."""
        self.check_reader(sessions.path, self.features, self.log1p_lexical)
        return dataclasses.replace(sessions, features=self.apply(sessions.features, sessions.mask))

    def check_reader(self, source: str, features: str, log1p_lexical: bool) -> None:
        """Refuse reader settings other than those fitted under (the statistics would not fit the values)."""
        if (features, bool(log1p_lexical)) != (self.features, bool(self.log1p_lexical)):
            raise ValueError("%s: read with features=%s, log1p_lexical=%s, but the standardisation was fitted with "
                             "features=%s, log1p_lexical=%s" % (source, features, log1p_lexical, self.features,
                                                                self.log1p_lexical))

    def to_json(self) -> dict:
        return {"mean": self.mean.tolist(), "std": self.std.tolist(), "features": self.features,
                "log1p_lexical": bool(self.log1p_lexical), "fitted_on": list(self.fitted_on),
                "n_documents": int(self.n_documents)}

    @classmethod
    def from_json(cls, record: dict) -> "Standardizer":
        return cls(np.asarray(record["mean"], dtype=np.float64), np.asarray(record["std"], dtype=np.float64),
                   record["features"], bool(record["log1p_lexical"]), tuple(record["fitted_on"]),
                   int(record["n_documents"]))

    def save(self, path: str) -> str:
        atomic_write_text(path, json.dumps(self.to_json(), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str) -> "Standardizer":
        with open(path) as handle:
            return cls.from_json(json.load(handle))

    def same_as(self, other: "Standardizer") -> bool:
        return (self.features, self.log1p_lexical) == (other.features, other.log1p_lexical) and \
            np.array_equal(self.mean, other.mean) and np.array_equal(self.std, other.std)


def fit_sessions(batches: Iterable, features: str, log1p_lexical: bool) -> Standardizer:
    """Fit on the shown documents of an iterable of :class:`~ultra_multr.click_logs.baidu.Sessions` (float64 sums:
    the result does not depend on how the documents are split into files).

    Raises:
        ValueError: no shown document.
    """
    total = total_sq = None
    count, paths = 0, []
    for sessions in batches:
        shown = sessions.features[sessions.mask].astype(np.float64)
        if total is None:
            total, total_sq = np.zeros(shown.shape[1]), np.zeros(shown.shape[1])
        total += shown.sum(axis=0)
        total_sq += np.square(shown).sum(axis=0)
        count += len(shown)
        paths.append(sessions.path)
    if not count:
        raise ValueError("no shown document to fit the standardisation on (%s)" % (paths or "no file"))
    mean = total / count
    std = np.sqrt(np.maximum(total_sq / count - np.square(mean), 0.0))
    std = np.where(std < MIN_STD, 1.0, std)
    return Standardizer(mean, std, features, bool(log1p_lexical), tuple(paths), count)


def fit_files(paths: Sequence[str], features: str = "lexical", top_n: Optional[int] = 10,
              log1p_lexical: bool = True) -> Standardizer:
    """Fit on the shown documents (first ``top_n`` positions) of the click files ``paths``, one file at a time."""
    from ultra_multr.click_logs import baidu
    from ultra_multr.progress import progress

    return fit_sessions(progress(baidu.iter_sessions(paths, features, top_n, log1p_lexical, "clicks"), total=len(paths),
                                 desc="standardisation: files", unit="files"), features, log1p_lexical)


def stored_with_model(model_dir: Optional[str], data_dir: Optional[str]) -> Optional[Standardizer]:
    """The statistics a model was trained with: ``<model_dir>/``:data:`STATS_JSON` (written by the feed), else
    the data directory's (written by the converter); None when neither exists (no standardisation).

    Raises:
        ValueError: both exist and differ (the model was trained on another transform than the data directory's).
    """
    found: List[Standardizer] = []
    for directory in (model_dir, data_dir):
        path = os.path.join(directory, STATS_JSON) if directory else None
        if path and os.path.isfile(path):
            found.append(Standardizer.load(path))
    if len(found) == 2 and not found[0].same_as(found[1]):
        raise ValueError("%s and %s differ: the model was trained with another standardisation than the data "
                         "directory's" % (os.path.join(model_dir, STATS_JSON), os.path.join(data_dir, STATS_JSON)))
    return found[0] if found else None
