"""Results of earlier data checks, so that a start on data checked before only hashes the files.

A study starts main.py many times on the same files (folds x seeds x
methods); at Yahoo's size the full check of a split costs about as much as
ULTRA's own read of it.  After a split passes, its result (counts and
warnings) is stored under a key of the files' paths, sizes and modification
times; a later check with that key hashes the files (one read, which the
model dir's identity needs anyway) and reuses the result only if every
file's SHA-256 is the one checked, under the same ``feature_size``,
``max_label`` and rules (:data:`RULES_VERSION`).  Otherwise the split is
checked in full.  Failures are never stored: bad data is reported at every
start.

Where: ``$ULTRA_MULTR_CACHE/checks`` (default ``~/.cache/ultra_multr/checks``);
a cache that cannot be written is skipped (the check still runs).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

from ultra_multr.files import atomic_write_text

LOGGER = logging.getLogger("ultra_multr")
#: Bump when the checks change what they accept or count: results of other rules are not reused.
RULES_VERSION = 2  # 2: separators other than a space, a qid on two .init_list lines or in two libsvm blocks
BLOCK_BYTES = 1 << 22


def cache_root() -> str:
    """``$ULTRA_MULTR_CACHE`` (default ``~/.cache/ultra_multr``): the check results and the compact reader's
    feature matrices (:mod:`ultra_multr.data.feature_cache`) live in folders under it."""
    return os.environ.get("ULTRA_MULTR_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ultra_multr")


def cache_dir() -> str:
    return os.path.join(cache_root(), "checks")


def stat_key(paths: Sequence[str], rules: Dict, version: Optional[int] = None) -> str:
    """Key of the files as they are now (absolute path, size, mtime) and of the rules they were checked under
    (``version``: of those rules, :data:`RULES_VERSION` unless given; the feature cache passes its own)."""
    entries = []
    for path in paths:
        info = os.stat(path)
        entries.append([os.path.abspath(path), info.st_size, info.st_mtime_ns])
    text = json.dumps({"rules_version": RULES_VERSION if version is None else version, "rules": rules,
                       "files": entries}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def lookup(key: str, paths: Sequence[str]) -> Optional[Tuple[Dict, List[str]]]:
    """(stored result, SHA-256 of each path) when a check of these files passed before, else None.

    Hashes the files (one read each) only when a result is stored under ``key``.
    """
    try:
        with open(os.path.join(cache_dir(), key + ".json")) as handle:
            stored = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or len(stored.get("sha256", ())) != len(paths):
        return None
    hashes = [file_sha256(path) for path in paths]
    if hashes != stored["sha256"]:
        LOGGER.info("data checks: %s changed since its last check (same size and time, other bytes); "
                    "checking it again", ", ".join(paths))
        return None
    return stored["result"], hashes


def store(key: str, hashes: Sequence[str], result: Dict) -> None:
    """Record a passed check (skipped, with a debug line, when the cache cannot be written)."""
    try:
        atomic_write_text(os.path.join(cache_dir(), key + ".json"),
                          json.dumps({"sha256": list(hashes), "result": result}, sort_keys=True) + "\n")
    except OSError as error:
        LOGGER.debug("data checks: cannot record the result in %s: %s", cache_dir(), error)
