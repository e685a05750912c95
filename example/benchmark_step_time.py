"""Step time and peak memory: DLA vs MULTR at several sample_num, one process.

Usage::

    python example/benchmark_step_time.py [--batch-size 256] [--list-size 10]
        [--features 700] [--samples 0 8 32] [--steps 20] [--device cpu]

Every configuration trains on the same random batch (ULTRA's input-feed
format, so ``model.train`` does exactly what it does under main.py); the
feed itself is not timed.  The simulator's training step is timed on the
same batch.  Peak memory is the process's peak RSS (VmHWM, reset between
configurations) on CPU and ``torch.cuda.max_memory_allocated`` on CUDA.
Needs ULTRA importable.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time
from types import SimpleNamespace

import numpy as np
import torch

from ultra_multr.algorithms.dla import DLA
from ultra_multr.algorithms.multr import MULTR
from ultra_multr.simulator import simulator_loss


def input_feed(batch_size: int, list_size: int, features: int, seed: int = 0) -> dict:
    """A ULTRA input feed of random documents with cascade-like clicks."""
    rng = np.random.default_rng(seed)
    feed = {"letor_features": rng.uniform(-1, 1, (batch_size * list_size, features)).astype(np.float32)}
    first_click = rng.integers(0, list_size, batch_size)
    for i in range(list_size):
        feed["docid_input%d" % i] = (np.arange(batch_size) * list_size + i).astype(np.float32)
        feed["label%d" % i] = (first_click == i).astype(np.float32)
    return feed


def settings(algorithm: str, hparams: str, list_size: int) -> dict:
    return {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "",
        "ranking_model": "ultra.ranking_model.DNN",
        "ranking_model_hparams": "hidden_layer_sizes=[512,256,128]",
        "learning_algorithm": algorithm,
        "learning_algorithm_hparams": hparams,
        "max_candidate_num": list_size,
        "selection_bias_cutoff": list_size,
        "metrics": ["ndcg"],
        "metrics_topn": [10],
    }


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets VmHWM to the current RSS


def peak_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def timed(step, steps: int, warmup: int, device: torch.device) -> float:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--list-size", type=int, default=10)
    parser.add_argument("--features", type=int, default=700)
    parser.add_argument("--samples", type=int, nargs="+", default=[0, 8, 32])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    feed = input_feed(args.batch_size, args.list_size, args.features)
    data_set = SimpleNamespace(feature_size=args.features)
    common = "seed=0,device=%s,log_every=0" % args.device

    rows = []
    reset_peak(device)
    dla = DLA(data_set, settings("ultra_multr.DLA", common, args.list_size))
    dla_ms = timed(functools.partial(dla.train, feed), args.steps, args.warmup, device)
    rows.append(("DLA", dla_ms, peak_mb(device)))
    del dla

    simulator_ms = None
    for samples in args.samples:
        reset_peak(device)
        multr = MULTR(
            data_set,
            settings("ultra_multr.MULTR", common + ",simulator_steps=0,sample_num=%d" % samples, args.list_size),
        )
        multr.prepare_simulator()  # random weights: sampling costs the same as after training
        ms = timed(functools.partial(multr.train, feed), args.steps, args.warmup, device)
        rows.append(("MULTR sample_num=%d" % samples, ms, peak_mb(device)))
        if simulator_ms is None:
            simulator = multr.simulator
            simulator.train()
            for parameter in simulator.parameters():
                parameter.requires_grad_(True)
            optimizer = torch.optim.Adagrad(simulator.parameters(), lr=0.05)
            batch = multr.batch(feed, args.list_size)

            def simulator_step():
                logits = simulator.click_logits(batch.features, batch.mask, batch.labels)
                loss = simulator_loss(simulator, logits, batch.labels, batch.mask, 1e-5)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            simulator_ms = timed(simulator_step, args.steps, args.warmup, device)
        del multr

    print(
        "batch %d, N=%d, %d features, DNN [512,256,128], %s, %d torch threads, median of %d steps"
        % (args.batch_size, args.list_size, args.features, device, torch.get_num_threads(), args.steps)
    )
    print("| configuration | ms / step | x DLA | peak memory (MB) | x DLA |")
    print("|---|---|---|---|---|")
    for name, ms, peak in rows:
        print("| %s | %.1f | %.2f | %.0f | %.2f |" % (name, ms, ms / dla_ms, peak, peak / rows[0][2]))
    print("| simulator training step | %.1f | %.2f | | |" % (simulator_ms, simulator_ms / dla_ms))


if __name__ == "__main__":
    main()
