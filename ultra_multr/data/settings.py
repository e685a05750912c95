"""``settings.json`` of a ULTRA data directory: what it says about the data, read and checked."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from ultra_multr.data.feature_fields import DataCheckError


@dataclass(frozen=True)
class DataSettings:
    """What ``settings.json`` says about the data.

    Attributes:
        feature_size: F; feature indices run over 1..F (0 lands in slot F).
        max_label: the largest allowed label.
        sha256: hash of the file's bytes.
    """

    feature_size: int
    max_label: float
    sha256: str = ""



def read_settings(data_dir: str) -> DataSettings:
    """Read and check ``<data_dir>/settings.json``."""
    path = os.path.join(data_dir, "settings.json")
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        settings = json.loads(raw)
    except OSError as error:
        raise DataCheckError("%s: cannot read the data settings: %s" % (path, error)) from None
    except ValueError as error:
        raise DataCheckError("%s: not valid JSON: %s" % (path, error)) from None
    if not isinstance(settings, dict):
        raise DataCheckError("%s: expected a JSON object, got %s" % (path, type(settings).__name__))
    feature_size = settings.get("feature_size")
    if isinstance(feature_size, bool) or not isinstance(feature_size, int) or feature_size < 1:
        raise DataCheckError("%s: feature_size must be a positive integer, got %r" % (path, feature_size))
    max_label = settings.get("max_label")
    if isinstance(max_label, bool) or not isinstance(max_label, (int, float)) or not max_label >= 0:
        raise DataCheckError("%s: max_label must be a number >= 0 (ULTRA reads it), got %r" % (path, max_label))
    return DataSettings(feature_size=feature_size, max_label=float(max_label), sha256=hashlib.sha256(raw).hexdigest())
