"""The compact reader's parsed splits on disk: a later start maps a float32 matrix instead of parsing text.

An entry per split file, under ``$ULTRA_MULTR_CACHE/features`` (default
``~/.cache/ultra_multr/features``): ``KEY.npy``, the feature matrix with
ULTRA's zero padding row last, and ``KEY.json``, what else the parse gave (the
documents' ids; for the libsvm layout also its queries, lists and labels),
the SHA-256 of the file and the SHA-256 of ``KEY.npy``.  ``KEY`` is the
SHA-256 of the file's absolute path, size and modification time and of what
the parse depended on (layout, ``feature_size``, removed features,
``rank_cut``, text encoding, :data:`FORMAT_VERSION`).  A read with that key
hashes the file (one read, no parse) and the matrix, and takes the entry
only if both SHA-256 are the stored ones (a matrix whose bytes changed, say
flipped on disk with its size kept, is parsed again and the entry rewritten,
with a warning); the matrix is then memory-mapped copy-on-write (pages come
in as they are used and are shared between processes until one writes; a
write never reaches the file).

Written after a parse, atomically (temporary name, rename: the ``.json`` last,
so an entry without it is never read), unless the folder cannot be written or
its file system has less free space than the matrix plus 10 %; the entry it
replaces (same file and parse, other contents) is removed.  A matrix takes 4
bytes per feature: 1.3 GB for Yahoo's training split.
``ULTRA_MULTR_FEATURE_CACHE=0`` reads and writes no entry.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from ultra_multr.data import check_cache
from ultra_multr.files import atomic_write_file, atomic_write_text

LOGGER = logging.getLogger("ultra_multr")
ENV = "ULTRA_MULTR_FEATURE_CACHE"
#: Bump when the reader's output for the same text, or an entry's content, changes: older entries are not read.
FORMAT_VERSION = 2  # 2: the matrix's SHA-256 in the entry


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip() != "0"


def cache_dir() -> str:
    return os.path.join(check_cache.cache_root(), "features")


def entry_key(path: str, parse: Dict) -> str:
    """The key of ``path`` as it is now (path, size, mtime) read with the parse settings ``parse``."""
    return check_cache.stat_key([path], parse, version=FORMAT_VERSION)


@dataclass
class Entry:
    """A stored parse: ``matrix`` ([D + 1, F] float32, a copy-on-write memory map) and ``meta`` (its JSON)."""

    matrix: np.ndarray
    meta: Dict


def load(key: str, path: str) -> Optional[Entry]:
    """The entry under ``key`` if the file's SHA-256 is the one it was parsed from and the matrix's the one
    stored, else None.

    Hashes the file and the matrix (one read each) only when an entry exists;
    an unreadable or inconsistent entry is a miss (the split is parsed again),
    and a matrix whose bytes changed is said so, in a warning.
    """
    base = os.path.join(cache_dir(), key)
    try:
        with open(base + ".json") as handle:
            meta = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") is None or meta.get("matrix_sha256") is None:
        return None
    if check_cache.file_sha256(path) != meta["sha256"]:
        LOGGER.info("feature cache: %s changed since it was parsed (same size and time, other bytes); parsing it "
                    "again", path)
        return None
    try:
        matrix_sha256 = check_cache.file_sha256(base + ".npy")
    except OSError as error:
        LOGGER.info("feature cache: cannot read %s.npy (%s); parsing %s again", base, error, path)
        return None
    if matrix_sha256 != meta["matrix_sha256"]:
        LOGGER.warning("feature cache: %s.npy, the parsed features of %s, is not the matrix that was stored (its "
                       "SHA-256 differs: the file was damaged or changed); parsing %s again", base, path, path)
        return None
    try:
        matrix = np.load(base + ".npy", mmap_mode="c")  # copy-on-write: writable, the file never changes
    except (OSError, ValueError) as error:
        LOGGER.info("feature cache: cannot map %s.npy (%s); parsing %s again", base, error, path)
        return None
    if matrix.dtype != np.float32 or matrix.ndim != 2 or list(matrix.shape) != meta.get("shape"):
        return None
    return Entry(matrix=matrix, meta=meta)


def store(key: str, path: str, parse: Dict, sha256: str, matrix: np.ndarray, meta: Dict) -> Optional[str]:
    """Record a parse of ``path`` (``meta`` must be JSON); returns why it was not recorded (None: it was).

    Never raises for a cache that cannot be written: the reader goes on without it.
    """
    directory = cache_dir()
    base = os.path.join(directory, key)
    try:
        os.makedirs(directory, exist_ok=True)
        free = shutil.disk_usage(directory).free
        if free < 1.1 * matrix.nbytes:
            return "%d MB free under %s, the matrix takes %d MB" % (free >> 20, directory, matrix.nbytes >> 20)

        matrix_sha256 = []

        def write(tmp_path: str) -> None:
            with open(tmp_path, "wb") as handle:
                np.save(handle, matrix)
            matrix_sha256.append(check_cache.file_sha256(tmp_path))  # as written (read back from the page cache)

        atomic_write_file(base + ".npy", write)
        record = dict(meta, sha256=sha256, matrix_sha256=matrix_sha256[0], shape=list(matrix.shape),
                      path=os.path.abspath(path), parse=parse)
        atomic_write_text(base + ".json", json.dumps(record) + "\n")
    except OSError as error:
        for leftover in (base + ".npy", base + ".json"):
            if os.path.exists(leftover):
                os.remove(leftover)
        return str(error)
    _remove_replaced(key, os.path.abspath(path), parse)
    return None


def _remove_replaced(key: str, path: str, parse: Dict) -> None:
    """Remove the other entries of the same file and parse (its earlier contents: never read again)."""
    for other in glob.glob(os.path.join(cache_dir(), "*.json")):
        other_key = os.path.basename(other)[: -len(".json")]
        if other_key == key:
            continue
        try:
            with open(other) as handle:
                meta = json.load(handle)
            if meta.get("path") == path and meta.get("parse") == parse:
                os.remove(other)  # first: a half-removed entry is never read
                os.remove(os.path.join(cache_dir(), other_key + ".npy"))
        except (OSError, ValueError, AttributeError):
            continue

