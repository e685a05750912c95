"""Finished runs of a study, made up: records for the tables and their run folders on disk (tests of
ultra_multr.experiments.aggregate and .compare)."""
import json

from ultra_multr.experiments import methods as registry
from ultra_multr.experiments.aggregate import RunRecord
from ultra_multr.metrics import metric_names

METRICS = metric_names()


def method_runs(method, role, values_by_fold, seeds=(0, 1), variant=None, sweep=None, dataset="toy", as_host=None):
    """Runs of one method on ``dataset``: per fold, the [n] per-query values (same for every metric); ``as_host``
    ``{"host": "DLA", "why": "logger guard"}`` makes them runs that trained with their host's losses."""
    records = []
    for fold, values in values_by_fold.items():
        for seed in seeds:
            info = {"dataset": dataset, "fold": fold, "method": method, "label": method.upper(), "role": role,
                    "order": registry.table_order(method), "variant": variant, "sweep": sweep, "seed": seed}
            per_query = {"q%d" % i: {m: float(v) for m in METRICS} for i, v in enumerate(values)}
            records.append(RunRecord(info=info, per_query=per_query, as_host=as_host))
    return records


def write_runs(runs_dir, records):
    """Finished run folders (run.json, per_query_metrics.csv, done.json) for ``records``."""
    for i, record in enumerate(records):
        run_dir = runs_dir / ("%s_%s_%d" % (record.info["method"], record.info["fold"], i))
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps(record.info))
        rows = ["qid," + ",".join(METRICS)] + [
            q + "," + ",".join(str(v[m]) for m in METRICS) for q, v in record.per_query.items()
        ]
        (run_dir / "per_query_metrics.csv").write_text("\n".join(rows) + "\n")
        (run_dir / "done.json").write_text("{}")
        algorithm = record.info["method"].upper()
        trained_as = record.as_host["host"] if record.as_host else algorithm
        why = record.as_host["why"] if record.as_host else None
        (run_dir / "model").mkdir()
        decisions = {"ranker_losses": {"algorithm": algorithm, "trained_as": trained_as, "why": why}}
        (run_dir / "model" / "session_budget.json").write_text(json.dumps(
            {"ledger_version": 4, "phases": {}, "total_sessions": 0, "decisions": decisions}))
