"""Ingest rate of the Baidu-ULTR reader and the session-replay feed on a generated log (CPU).

python benchmarks/baidu_ingest_rate.py --out benchmarks/results/baidu_ingest [--sessions 5000 --per_file 2500]
python benchmarks/baidu_ingest_rate.py --out OUT --log_files 'baidu-ultr/parts/part-1_split-*.feather'

Generates a log in the release's layout (ultra_multr.generate.baidu_log), or takes the given files
(the real release's, or a log written by studies/baidu/run.py), then, each in a fresh
process, times read_sessions per feature choice (the second of two passes over the files: page cache
warm; sessions per second, bytes of the feature array per session, the process's peak resident memory
and its resident memory after the imports) and BaiduSessionFeed batches of 256 (lexical, two passes).
Writes ingest.csv and ingest.md.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ultra_multr.experiments.row_tables import markdown_lines, write_csv  # noqa: E402
from ultra_multr.files import atomic_write_text  # noqa: E402
from ultra_multr.experiments.runner.processes import peak_resident_kib  # noqa: E402
from ultra_multr.click_logs import baidu  # noqa: E402
from ultra_multr.generate.baidu_log import write_baidu_log  # noqa: E402


class _Model:
    feature_size, rank_list_size = 12, 10
    letor_features_name = "letor_features"
    docid_inputs_name = ["docid_input%d" % i for i in range(10)]
    labels_name = ["label%d" % i for i in range(10)]


class _Stub:
    initial_list = [[0]] * 100


def _rss_mib() -> int:
    """Peak resident memory of this process in MiB (VmHWM; ru_maxrss would carry the parent's over exec)."""
    return round(peak_resident_kib() / 1024)


def measure(what: str, files: list) -> dict:
    """One measurement in this (fresh) process; see the module docstring."""
    imported = _rss_mib()
    if what == "feed":
        from ultra_multr.feeds.baidu import BaiduSessionFeed

        feed = BaiduSessionFeed(_Model(), 256, "log_files=%s" % ";".join(files))
        total = sum(len(s) for s in baidu.iter_sessions(files, "lexical", 10))
        started, batches = time.perf_counter(), 0
        while batches * 256 < 2 * total:
            feed.get_batch(_Stub(), check_validation=True)
            batches += 1
        seconds, count, nbytes = time.perf_counter() - started, batches * 256, ""
        label = "BaiduSessionFeed.get_batch(256) lexical, 2 passes"
    else:
        for _ in range(2):
            started, count = time.perf_counter(), 0
            for sessions in baidu.iter_sessions(files, what, 10):
                count += len(sessions)
                nbytes = int(sessions.features.nbytes / len(sessions))
            seconds = time.perf_counter() - started
        label = "read_sessions features=%s" % what
    return {"what": label, "sessions": count, "seconds": round(seconds, 3),
            "sessions_per_second": round(count / seconds), "feature_bytes_per_session": nbytes,
            "peak_rss_mib": _rss_mib(), "rss_mib_after_imports": imported}


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(sys.argv[2], sys.argv[3:])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--per_file", type=int, default=2500)
    parser.add_argument("--log_files", help="a glob of Baidu-ULTR feather files to read instead of a generated log")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.log_files:
            files = sorted(glob.glob(args.log_files))
            if not files:
                parser.error("--log_files %r matches no file" % args.log_files)
            source = "%d file(s) `%s`" % (len(files), args.log_files)
        else:
            files = write_baidu_log(tmp, n_queries=200, n_sessions=args.sessions, n_test_sessions=0, n_annotated=10,
                                    sessions_per_file=args.per_file).train_files
            source = "generated log of %d sessions (%d per file, 6-10 documents)" % (args.sessions, args.per_file)
        for what in baidu.FEATURE_SETS + ("feed",):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", what] + files,
                                  capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    os.makedirs(args.out, exist_ok=True)
    write_csv(os.path.join(args.out, "ingest.csv"), rows)
    note = ("%s, top 10, one CPU process per row (2-core machine), `python benchmarks/baidu_ingest_rate.py %s`.\n\n"
            % (source[0].upper() + source[1:], " ".join(sys.argv[1:])))
    text = note + "\n".join(markdown_lines(rows)) + "\n"
    atomic_write_text(os.path.join(args.out, "ingest.md"), text)
    print(text)


if __name__ == "__main__":
    main()
