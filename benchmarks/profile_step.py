"""Where a training step's time goes: torch.profiler over DLA and MULTR steps.

Usage::

    python benchmarks/profile_step.py [--device cuda] [--samples 8] [--steps 10]
        [--batch-size 256] [--list-size 10] [--features 700] [--rows 20]
        [--multr-hparams "cuda_graphs=off"]

The same random batch and models as ``step_time.py``.  For each
configuration: wall milliseconds per step, kernel launches per step (CUDA)
and the operators with the most self time (device time on CUDA, CPU time on
CPU).  Needs ULTRA importable.
"""
from __future__ import annotations

import argparse
import functools
import time
from types import SimpleNamespace

import torch
from torch.profiler import ProfilerActivity, profile

from ultra_multr.algorithms.dla import DLA
from ultra_multr.algorithms.multr import MULTR
from ultra_multr.experiments.step_inputs import input_feed, settings

#: profiler event names of kernel launches (runtime API, driver API)
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cudaLaunchKernelExC")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--list-size", type=int, default=10)
    parser.add_argument("--features", type=int, default=700)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--multr-hparams", default="", help="extra MULTR hparams")
    args = parser.parse_args()
    device = torch.device(args.device)
    feed = input_feed(args.batch_size, args.list_size, args.features)
    data_set = SimpleNamespace(feature_size=args.features)
    common = "seed=0,device=%s,log_every=0" % args.device
    dla = DLA(data_set, settings("ultra_multr.DLA", common, args.list_size))
    multr_hparams = ",".join(filter(None, [
        common, "simulator_steps=0,imputation=sampled,dr_weight_guard=clip,sample_num=%d" % args.samples, args.multr_hparams
    ]))
    multr = MULTR(data_set, settings("ultra_multr.MULTR", multr_hparams, args.list_size))
    multr.prepare()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    for name, step in [("DLA", functools.partial(dla.train, feed)), ("MULTR " + multr_hparams, functools.partial(multr.train, feed))]:
        for _ in range(args.warmup):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        with profile(activities=activities) as profiler:
            for _ in range(args.steps):
                step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        elapsed = (time.perf_counter() - started) * 1000.0 / args.steps
        events = profiler.key_averages()
        launches = sum(e.count for e in events if e.key in LAUNCHES) / args.steps
        print("\n## %s: %.1f ms per step under the profiler, %.0f kernel launches per step" % (name, elapsed, launches))
        print(events.table(sort_by=sort, row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
