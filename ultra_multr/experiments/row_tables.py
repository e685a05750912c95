"""Rows of dicts (one column per key, the first row's keys) as an atomically written CSV and a Markdown table.

Shared by the scripts that report one measurement per row (``benchmarks/baidu_ingest_rate.py``,
``studies/baidu/feature_reliance.py``).
"""
from __future__ import annotations

import csv
from typing import Dict, List, Sequence

from ultra_multr.files import atomic_write_file


def write_csv(path: str, rows: Sequence[Dict]) -> None:
    """``rows`` as CSV at ``path`` (header: the first row's keys), through a temporary file and a rename."""

    def write(tmp_path: str) -> None:
        with open(tmp_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    atomic_write_file(path, write)


def markdown_lines(rows: Sequence[Dict]) -> List[str]:
    """``rows`` as the lines of a Markdown table (header: the first row's keys; cells as ``str``)."""
    return (["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
            + ["| " + " | ".join(str(v) for v in row.values()) + " |" for row in rows])
