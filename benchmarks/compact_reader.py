"""The compact reader against ULTRA's reader: read time and peak memory, at Yahoo's and Istella-S's shapes.

Usage::

    nice -n 10 python benchmarks/compact_reader.py --shape yahoo --fraction 0.1 --data DIR [--repeats 2]
        [--main-steps 100] [--out benchmarks/results/compact_reader/yahoo_0.1]
    python benchmarks/compact_reader.py --summarize benchmarks/results/compact_reader   # one table of every run
    python benchmarks/compact_reader.py --tiny        # a few queries: checks the script

``--shape yahoo``: Yahoo! LETOR's shape, 20,000 training queries at
``--fraction 1`` (valid and test a tenth each, as in benchmarks/scale.py),
12-36 documents per query (mean 24), 700 features; ``--shape istella``:
Istella-S's, 33,018 queries at 1 (19,245 / 7,211 / 6,562), 52-154 documents
per query (mean 103), 220 features.  The set is written to ``--data`` by
``write_synthetic_ultra_dataset`` (seeded) unless it is there already.

Each measurement is one child process (``python benchmarks/compact_reader.py
--child``) that imports ULTRA and reads the splits main.py reads for
training (train and valid) with ``ultra.utils.read_data``, then sums every
feature of the compact reader's matrices (so a memory-mapped one is resident,
as training makes it); its peak RSS is ``ru_maxrss`` from ``wait4``.
Configurations, alternating within each repeat (A B C D A B C D ...):

- ``ultra``: ULTRA's reader (``ULTRA_MULTR_COMPACT_READER=0``); only up to
  ``--ultra-max-fraction`` (default 0.25), projected beyond (linear in
  documents from the measured sizes, labelled);
- ``compact_first``: the compact reader, no feature cache
  (``ULTRA_MULTR_FEATURE_CACHE=0``): the first read of the text;
- ``compact_store``: the compact reader with an empty cache: the first
  start, which parses and writes the cache;
- ``compact_later``: the compact reader on the cache ``compact_store`` wrote:
  a later start (hash the text, map the matrices).

``--main-steps N`` adds whole ``main.py`` trainings of N steps of our DLA
(benchmarks/scale.py's ``dla`` configuration: DNN [512, 256, 128], batch
256): ``main_ultra`` (ULTRA's reader, only up to ``--ultra-max-fraction``),
``main_compact_first`` (no feature cache: parsed) and
``main_compact_later`` (on a warm feature cache): peak RSS and the time to
the first update.  Writes ``OUT.csv`` (one row per run) and ``OUT.md`` (medians and
the ratios).
"""
from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from ultra_multr.files import atomic_write_text  # noqa: E402

#: shape -> (queries per split at fraction 1, documents per query (inclusive range), features)
SHAPES = {
    "yahoo": ({"train": 20000, "valid": 2000, "test": 2000}, (12, 36), 700),
    "istella": ({"train": 19245, "valid": 7211, "test": 6562}, (52, 154), 220),
}
READ_CONFIGS = ("ultra", "compact_first", "compact_store", "compact_later")
MAIN_CONFIGS = ("main_ultra", "main_compact_first", "main_compact_later")
COLUMNS = ("shape", "fraction", "config", "repeat", "exit", "documents", "text_mb", "process_s", "import_s",
           "read_s", "read_cpu_s", "train_read_s", "valid_read_s", "rss_after_read_mb", "peak_rss_mb", "first_update_s")


def child(args: argparse.Namespace) -> int:
    """Read the splits with ``ultra.utils.read_data`` (the reader the environment chooses) and print one JSON line."""
    started = time.perf_counter()
    import numpy as np
    import ultra

    imported = time.perf_counter()
    cpu = time.process_time()
    seconds, documents = {}, 0
    data_sets = []
    for split in args.splits:
        before = time.perf_counter()
        data = ultra.utils.read_data(args.data, split, None)
        seconds[split] = time.perf_counter() - before
        documents += len(data.dids)
        data_sets.append(data)
    read = time.perf_counter()
    read_cpu = time.process_time() - cpu
    rss_after_read = rss_mb()
    for data in data_sets:  # a mapped matrix comes in as training uses it: all of it, here
        if isinstance(data.features, np.ndarray):
            float(data.features.sum(dtype=np.float64))
    print(json.dumps({"import_s": imported - started, "read_s": read - imported, "read_cpu_s": read_cpu,
                      "split_s": seconds,
                      "documents": documents, "rss_after_read_mb": rss_after_read,
                      "reader": type(data_sets[0]).__name__}), flush=True)
    return 0


def rss_mb() -> Optional[float]:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


def environment(config: str, cache: str) -> Dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", ULTRA_MULTR_CACHE=cache,
               PYTHONPATH=os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env["ULTRA_MULTR_COMPACT_READER"] = "0" if config in ("ultra", "main_ultra") else "1"
    env["ULTRA_MULTR_FEATURE_CACHE"] = "0" if config in ("compact_first", "main_compact_first") else "1"
    return env


def wait_peak(process: subprocess.Popen) -> float:
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024.0


def run_read(config: str, data_dir: str, workdir: str, repeat: int) -> Dict:
    """One child process of a read configuration; its row, with the child's peak RSS (``wait4``)."""
    cache = os.path.join(workdir, "cache_%s_%d" % ("compact_store" if config == "compact_later" else config, repeat))
    if config == "compact_store" and os.path.isdir(cache):
        raise SystemExit("%s exists: compact_store must start on an empty cache" % cache)
    command = [sys.executable, os.path.abspath(__file__), "--child", "--data", data_dir, "--splits", "train", "valid"]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, env=environment(config, cache), stdout=out, stderr=err, text=True)
        peak = wait_peak(process)
        total = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    row = {"config": config, "repeat": repeat, "exit": process.returncode, "process_s": total, "peak_rss_mb": peak}
    report = next((json.loads(line) for line in stdout.splitlines() if line.startswith("{")), None)
    expected = "Raw_data" if config == "ultra" else "CompactRawData"
    if process.returncode != 0 or report is None or report["reader"] != expected:
        sys.stderr.write("%s failed (exit %s, reader %s):\n%s" % (
            config, process.returncode, report and report["reader"], stderr[-3000:]))
        row["exit"] = process.returncode or 1
        return row
    row.update(import_s=report["import_s"], read_s=report["read_s"], read_cpu_s=report["read_cpu_s"],
               documents=report["documents"],
               train_read_s=report["split_s"]["train"], valid_read_s=report["split_s"]["valid"],
               rss_after_read_mb=report["rss_after_read_mb"])
    return row


def run_main(config: str, data_dir: str, workdir: str, repeat: int, args: argparse.Namespace) -> Dict:
    """One main.py training of benchmarks/scale.py's ``dla`` configuration with the reader of ``config``
    (``main_compact_later`` on the feature cache a read child filled first)."""
    import scale

    run_args = argparse.Namespace(steps=args.main_steps, simulator_steps=0, pilot_steps=0, batch_size=256, threads=1,
                                  train_queries=0, device="cpu", tiny=False)
    main_dir = os.path.join(workdir, "main")  # scale.run_once keeps its caches in main_dir/cache
    os.makedirs(main_dir, exist_ok=True)
    cache = os.path.join(main_dir, "cache")
    if config == "main_compact_later" and not os.path.isdir(os.path.join(cache, "features")):
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--data", data_dir],
                               env=environment("compact_store", cache), capture_output=True, text=True)
        if child.returncode != 0:
            sys.stderr.write(child.stderr[-3000:])
    saved = {name: os.environ.get(name) for name in ("ULTRA_MULTR_COMPACT_READER", "ULTRA_MULTR_FEATURE_CACHE")}
    os.environ.update({k: v for k, v in environment(config, cache).items() if k in saved})
    try:
        scale_row = scale.run_once(args.main_py, "dla", data_dir, run_args, main_dir)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return {"config": config, "repeat": repeat, "exit": scale_row["exit"], "process_s": scale_row["total_s"],
            "import_s": scale_row["ultra_import_s"], "read_s": scale_row["ultra_read_s"],
            "rss_after_read_mb": scale_row["rss_after_ultra_read_mb"], "peak_rss_mb": scale_row["peak_rss_mb"],
            "first_update_s": scale_row["first_update_s"]}


def text_mb(data_dir: str) -> float:
    return sum(os.path.getsize(path) for split in ("train", "valid")
               for path in glob.glob(os.path.join(data_dir, split, "*"))) / 2 ** 20


def fmt(value) -> str:
    if value is None or value == "":
        return ""
    return "%.6g" % value if isinstance(value, float) else str(value)


def read_rows(paths: List[str]) -> List[Dict]:
    rows = []
    for path in paths:
        with open(path) as handle:
            for row in csv.DictReader(handle):
                for column, value in row.items():
                    if column in ("shape", "config"):
                        continue
                    row[column] = None if value == "" else float(value)
                rows.append(row)
    return rows


def median(rows: List[Dict], config: str, column: str) -> Optional[float]:
    seen = [r[column] for r in rows if r["config"] == config and r["exit"] == 0 and r.get(column) is not None]
    return statistics.median(seen) if seen else None


def summary_markdown(rows: List[Dict], title: str, machine: str) -> str:
    """Per (shape, fraction): the medians of every configuration, the ratios to ULTRA's reader (measured, or
    projected linearly in documents from the sizes where it was measured: labelled)."""
    out = io.StringIO()
    out.write("# %s\n\nMachine: %s\n\n" % (title, machine))
    out.write("Medians over repeats, seconds and MB. read_s: train + valid by `ultra.utils.read_data` in a fresh "
              "process (ULTRA's import excluded; read_cpu_s: its CPU time, less moved by other jobs); peak_rss_mb: "
              "the process's peak (`ru_maxrss`), after every feature was summed; main_*: whole main.py runs "
              "(read_s: ULTRA's import to \"Train Rank list size\"; first_update_s: from the process start).\n\n")
    out.write("| shape | fraction | documents | text MB | config | n | read_s | read_cpu_s | peak_rss_mb | first_update_s |"
              " read vs ultra | peak vs ultra |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for shape in sorted({r["shape"] for r in rows}):
        measured = [r for r in rows if r["shape"] == shape]
        ultra_points = sorted({(r["documents"], r["fraction"]) for r in measured
                               if r["config"] == "ultra" and r["exit"] == 0 and r["documents"]})
        projection = _linear(measured, ultra_points)
        for fraction in sorted({r["fraction"] for r in measured}):
            at = [r for r in measured if r["fraction"] == fraction]
            documents = median(at, "compact_first", "documents") or median(at, "ultra", "documents")
            reference = {c: median(at, "ultra", c) for c in ("read_s", "peak_rss_mb")}
            projected = False
            if reference["read_s"] is None and projection and documents:
                reference = {c: projection[c][0] + projection[c][1] * documents for c in projection}
                projected = True
            for config in READ_CONFIGS + MAIN_CONFIGS:
                n = sum(1 for r in at if r["config"] == config and r["exit"] == 0)
                if not n:
                    continue
                cells = [median(at, config, c) for c in ("read_s", "read_cpu_s", "peak_rss_mb", "first_update_s")]
                ratios = []
                for value, column in zip((cells[0], cells[2]), ("read_s", "peak_rss_mb")):
                    base = reference.get(column)
                    ratios.append("" if value is None or not base or config.startswith("main") or config == "ultra"
                                  else "%.2fx%s" % (base / value, " (ULTRA projected)" if projected else ""))
                out.write("| %s | %g | %s | %.0f | %s | %d | %s | %s | %s | %s | %s | %s |\n" % (
                    shape, fraction, "%d" % documents if documents else "", median(at, config, "text_mb") or 0,
                    config, n, *(("%.2f" % c) if c is not None else "" for c in cells), *ratios))
            if projected:
                out.write("| %s | %g | %d | | ultra (projected, not measured) | | %.2f | | %.0f | | | |\n" % (
                    shape, fraction, documents, reference["read_s"], reference["peak_rss_mb"]))
    out.write("\n\"read vs ultra\": ULTRA's read_s over the configuration's (how many times faster); \"peak vs ultra\": "
              "ULTRA's peak over the configuration's. ULTRA projected: a line through ULTRA's medians at the sizes it "
              "was measured (read_s and peak_rss_mb linear in documents), not measured.\n")
    return out.getvalue()


def _linear(rows: List[Dict], points) -> Optional[Dict[str, tuple]]:
    """(intercept, slope per document) of ULTRA's read_s and peak_rss_mb over the measured sizes (two or more)."""
    if len(points) < 2:
        return None
    fit = {}
    for column in ("read_s", "peak_rss_mb"):
        xs = [d for d, _ in points]
        ys = [median([r for r in rows if r["fraction"] == f], "ultra", column) for _, f in points]
        mean_x, mean_y = statistics.mean(xs), statistics.mean(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
        fit[column] = (mean_y - slope * mean_x, slope)
    return fit


def generate(shape: str, fraction: float, data_dir: str) -> None:
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

    sizes, docs, features = SHAPES[shape]
    if os.path.isfile(os.path.join(data_dir, "settings.json")):
        with open(os.path.join(data_dir, "generated_shape.json")) as handle:
            written = json.load(handle)
        if written != {"shape": shape, "fraction": fraction}:
            raise SystemExit("%s holds the set %s, not %s at %g" % (data_dir, written, shape, fraction))
        return
    started = time.perf_counter()
    write_synthetic_ultra_dataset(data_dir, {s: max(2, int(round(n * fraction))) for s, n in sizes.items()},
                                  docs_per_query=docs, n_features=features, seed=0)
    atomic_write_text(os.path.join(data_dir, "generated_shape.json"), json.dumps({"shape": shape, "fraction": fraction}))
    print("generated %s in %.1f s" % (data_dir, time.perf_counter() - started), flush=True)


def measure(args: argparse.Namespace, shape: str, fraction: float, data_dir: str, workdir: str) -> List[Dict]:
    generate(shape, fraction, data_dir)
    data_dir = os.path.join(os.path.abspath(data_dir), "")
    configs = [c for c in READ_CONFIGS if c != "ultra" or fraction <= args.ultra_max_fraction]
    main_configs = [c for c in MAIN_CONFIGS if c != "main_ultra" or fraction <= args.ultra_max_fraction]
    rows = []
    size = text_mb(data_dir)
    print(",".join(COLUMNS), flush=True)
    for repeat in range(args.repeats):
        for config in configs + (main_configs if args.main_steps else []):
            if config.startswith("main"):
                row = run_main(config, data_dir, workdir, repeat, args)
            else:
                row = run_read(config, data_dir, workdir, repeat)
            row.update(shape=shape, fraction=fraction, text_mb=size)
            rows.append(row)
            print(",".join(fmt(row.get(c)) for c in COLUMNS), flush=True)
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="yahoo")
    parser.add_argument("--fraction", type=float, default=0.1, help="of the shape's queries (1: the full shape)")
    parser.add_argument("--data", help="the data directory (written first unless it holds this shape and fraction)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--ultra-max-fraction", type=float, default=0.25,
                        help="ULTRA's reader is measured up to this fraction, projected beyond")
    parser.add_argument("--main-steps", type=int, default=0, help="also train main.py for this many steps (>= 2)")
    parser.add_argument("--main-py", default=os.environ.get("ULTRA_MAIN"), help="ULTRA's main.py ($ULTRA_MAIN)")
    parser.add_argument("--workdir", help="caches and main.py runs (default: a temporary dir)")
    parser.add_argument("--out", help="output prefix: writes OUT.csv and OUT.md")
    parser.add_argument("--summarize", metavar="DIR", help="only write DIR/summary.md from every CSV in DIR")
    parser.add_argument("--tiny", action="store_true",
                        help="check the script: Yahoo at 0.002 and Istella-S at 0.0005, one repeat, 2 main.py steps")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--splits", nargs="+", default=["train", "valid"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    import scale  # machine_line

    if args.summarize:
        rows = read_rows(sorted(glob.glob(os.path.join(args.summarize, "*.csv"))))
        markdown = summary_markdown(rows, "The compact reader: every run in %s" % args.summarize,
                                    scale.machine_line() + ", when this summary was written (not during the runs)")
        atomic_write_text(os.path.join(args.summarize, "summary.md"), markdown)
        print(markdown)
        return 0
    if args.tiny:
        args.repeats, args.main_steps, args.ultra_max_fraction = 1, args.main_steps or 2, 1.0
        runs = [("yahoo", 0.002), ("istella", 0.0005)]
    elif not args.data:
        parser.error("--data is required (or --tiny)")
    else:
        runs = [(args.shape, args.fraction)]
    if args.main_steps and args.main_steps < 2:
        parser.error("--main-steps must be >= 2")
    if args.main_steps and args.main_py is None:
        import ultra

        args.main_py = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "main.py")
    with tempfile.TemporaryDirectory(prefix="benchmark_compact_reader-") as temporary:
        workdir = os.path.abspath(args.workdir or temporary)
        os.makedirs(workdir, exist_ok=True)
        rows = []
        for shape, fraction in runs:
            data_dir = args.data if not args.tiny else os.path.join(workdir, "data_%s" % shape)
            rows += measure(args, shape, fraction, data_dir, os.path.join(workdir, "%s_%g" % (shape, fraction)))
        title = "The compact reader: %s" % ", ".join("%s at %g" % run for run in runs)
        markdown = summary_markdown(rows, title, scale.machine_line())
        markdown += "\nWritten by `benchmarks/compact_reader.py %s`.\n" % " ".join(sys.argv[1:] if argv is None else argv)
        print(markdown)
        if args.out:
            table = io.StringIO()
            writer = csv.DictWriter(table, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows({c: fmt(r.get(c)) for c in COLUMNS} for r in rows)
            atomic_write_text(args.out + ".csv", table.getvalue())
            atomic_write_text(args.out + ".md", markdown)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
