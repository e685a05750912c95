"""Step time and peak memory: DLA vs MULTR at several sample_num, one process.

Usage::

    python benchmarks/step_time.py [--batch-size 256] [--list-size 10]
        [--features 700] [--samples 0 8 32] [--steps 20] [--device cpu]
        [--multr-hparams "simulator_input_mlp=[128]"] [--expected-samples 8 32]

On CUDA, sampled-mode rows come twice: with the default ``cuda_graphs=auto``
(sampling replayed as CUDA graphs) and with ``cuda_graphs=off`` (eager),
and the simulator's training step both eager and as a CUDA graph.
Every configuration trains on the same random batch (ULTRA's input-feed
format, so ``model.train`` does exactly what it does under main.py); the
feed itself is not timed.  The simulator's training step is timed on the
same batch.  Step times are taken in interleaved rounds (one step of every
configuration per round) and each ratio is the median of per-round ratios to
DLA.  Peak memory is measured first, one configuration at a time during its
warm-up: the process's peak RSS (VmHWM, reset before each) on CPU and
``torch.cuda.max_memory_allocated`` on CUDA.
Needs ULTRA importable.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time
from types import SimpleNamespace
from typing import Callable, Dict, List

import numpy as np
import torch

from ultra_multr.algorithms.dla import DLA
from ultra_multr.algorithms.multr import MULTR
from ultra_multr.experiments.runner.processes import peak_resident_kib
from ultra_multr.experiments.step_inputs import input_feed, settings
from ultra_multr.simulator import (
    ContextAwareUserSimulator,
    GraphedSimulatorUpdate,
    SimulatorConfig,
    queries_per_chunk,
    simulator_update,
)


def raw_data(feed: dict, list_size: int, features: int) -> SimpleNamespace:
    """The feed's lists as a ULTRA Raw_data (what MULTR's one-off pass reads)."""
    ids = np.stack([feed["docid_input%d" % i] for i in range(list_size)], axis=1).astype(np.int64)
    labels = np.stack([feed["label%d" % i] for i in range(list_size)], axis=1)
    return SimpleNamespace(
        feature_size=features, features=feed["letor_features"], initial_list=ids.tolist(), labels=labels.tolist()
    )


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets VmHWM to the current RSS


def peak_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    kib = peak_resident_kib()
    return float("nan") if kib is None else kib / 1024.0


def warm_up_and_peak(step, warmup: int, device: torch.device) -> float:
    """Run ``step`` ``warmup`` times from a reset peak; return the peak (MB)."""
    reset_peak(device)
    for _ in range(warmup):
        step()
    return peak_mb(device)


def interleaved_times(
    steps: Dict[str, Callable[[], None]], rounds: int, warmup: int, device: torch.device
) -> Dict[str, List[float]]:
    """Milliseconds per call of every step function, one call of each per
    round, after ``warmup`` untimed rounds.

    Interleaving exposes every configuration to the same machine state, so
    slow drifts (other tenants of a virtual machine, frequency changes) move
    all of them together and the per-round ratios stay meaningful.
    """
    times: Dict[str, List[float]] = {name: [] for name in steps}
    for _ in range(warmup):
        for step in steps.values():
            step()
    for _ in range(rounds):
        for name, step in steps.items():
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[name].append((time.perf_counter() - start) * 1000.0)
    return times


def simulator_training_step(multr: MULTR, feed: dict, list_size: int, graphed: bool) -> Callable[[], None]:
    """One Adam step (MULTR's default optimizer) of the simulator loss on the feed's clicks (its own copy of
    the simulator), eager or replayed as a CUDA graph."""
    simulator = ContextAwareUserSimulator(multr.simulator_phase.simulator_config).to(multr.device)
    optimizer = torch.optim.Adam(simulator.parameters(), lr=0.005, capturable=graphed)
    batch = multr.batch(feed, list_size)
    if graphed:
        return functools.partial(
            GraphedSimulatorUpdate(simulator, optimizer, l2_weight=1e-5), batch.features, batch.mask, batch.labels
        )
    return functools.partial(
        simulator_update, simulator, optimizer, batch.features, batch.mask, batch.labels, l2_weight=1e-5
    )


def simulator_matrix_products(
    config: SimulatorConfig, features: torch.Tensor, samples: int, list_size: int
) -> Callable[[], None]:
    """The matrix products that exact sampling cannot avoid, and nothing else.

    Per step of MULTR the frozen simulator needs the input projections of
    every document (both encoder directions, the decoder's document block)
    and, for each of the ``batch x (samples + 1)`` lists, the recurrent
    products of the forward encoder, the backward encoder and the decoder at
    every position but the first (plus the input MLP's products, if any), in
    the same chunks of lists as ``sample_clicks``.  Timing them alone (random operands of the same
    shapes; no sigmoid, gather or sampling, nothing of the ranker) gives a
    lower bound on what MULTR adds to a DLA step on this machine.
    """
    gates = 4 * config.hidden_size
    docs = features.reshape(-1, features.shape[-1])
    widths = (docs.shape[1],) + config.input_mlp
    mlp = [torch.randn(a, b, device=features.device) for a, b in zip(widths, widths[1:])]
    projection = torch.randn(widths[-1], 2 * gates + config.hidden_size, device=features.device)
    document_to_gates = torch.randn(config.hidden_size, gates, device=features.device)
    batch = features.shape[0]
    queries = queries_per_chunk(batch, samples + 1)
    chunk_lists = [(min(start + queries, batch) - start) * (samples + 1) for start in range(0, batch, queries)]
    encoder = torch.randn(config.hidden_size, gates, device=features.device)
    decoder = torch.randn(config.hidden_size + 1, gates, device=features.device)  # + the previous click
    states = {
        lists: (
            torch.randn(lists, config.hidden_size, device=features.device),
            torch.randn(lists, config.hidden_size + 1, device=features.device),
        )
        for lists in chunk_lists
    }

    def products() -> None:
        projected = docs
        for layer in mlp:
            projected = projected @ layer
        projected = projected @ projection
        projected[:, 2 * gates :] @ document_to_gates
        for lists in chunk_lists:
            encoder_state, decoder_state = states[lists]
            for _ in range(list_size - 1):
                encoder_state @ encoder  # forward direction
                encoder_state @ encoder  # backward direction
                decoder_state @ decoder

    return products


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--list-size", type=int, default=10)
    parser.add_argument("--features", type=int, default=700)
    parser.add_argument("--samples", type=int, nargs="+", default=[0, 8, 32])
    parser.add_argument(
        "--expected-samples", type=int, nargs="*", default=[8, 32], help="sample_num of imputation=expected rows"
    )
    parser.add_argument("--steps", type=int, default=20, help="timed rounds (one step of every configuration each)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--multr-hparams",
        default="",
        help="extra MULTR hparams for every MULTR configuration, e.g. 'simulator_input_mlp=[128]'",
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    feed = input_feed(args.batch_size, args.list_size, args.features)
    data_set = SimpleNamespace(feature_size=args.features)
    common = "seed=0,device=%s,log_every=0" % args.device

    # Peak memory: one configuration at a time, each from a reset peak.
    steps: Dict[str, Callable[[], None]] = {}
    peaks: Dict[str, float] = {}
    reset_peak(device)
    dla = DLA(data_set, settings("ultra_multr.DLA", common, args.list_size))
    steps["DLA"] = functools.partial(dla.train, feed)
    peaks["DLA"] = warm_up_and_peak(steps["DLA"], args.warmup, device)
    # On CUDA the sampled mode replays its sampling as CUDA graphs by default; eager rows beside them.
    graphs = ["auto", "off"] if device.type == "cuda" else ["auto"]
    for samples, graph in [(s, g) for s in args.samples for g in graphs]:
        name = "MULTR sample_num=%d%s" % (samples, " cuda_graphs=off" if graph == "off" else "")
        reset_peak(device)
        multr = MULTR(
            data_set,
            settings(
                "ultra_multr.MULTR",
                ",".join(
                    filter(
                        None,
                        [common, "simulator_steps=0,imputation=sampled,dr_weight_guard=clip,sample_num=%d,cuda_graphs=%s"
                         % (samples, graph),
                         "rerank_weight=0" if samples == 0 else "", args.multr_hparams],
                    )
                ),
                args.list_size,
            ),
        )
        multr.prepare()  # random weights: sampling costs the same as after training
        steps[name] = functools.partial(multr.train, feed)
        peaks[name] = warm_up_and_peak(steps[name], args.warmup, device)
    pass_seconds = []
    for samples in args.expected_samples:
        name = "MULTR imputation=expected sample_num=%d" % samples
        reset_peak(device)
        expected = MULTR(
            raw_data(feed, args.list_size, args.features),
            settings(
                "ultra_multr.MULTR",
                ",".join(
                    filter(
                        None,
                        [common, "simulator_steps=0,imputation=expected,sample_num=%d" % samples, args.multr_hparams],
                    )
                ),
                args.list_size,
            ),
        )
        started = time.perf_counter()
        expected.prepare()  # the one-off pass over the batch's lists
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        pass_seconds.append((time.perf_counter() - started) * 1000.0 / args.batch_size)
        steps[name] = functools.partial(expected.train, feed)
        peaks[name] = warm_up_and_peak(steps[name], args.warmup, device)
    features = multr.batch(feed, args.list_size).features
    for samples in args.samples:
        steps["lower bound: simulator matrix products alone, sample_num=%d" % samples] = simulator_matrix_products(
            multr.simulator_phase.simulator_config, features, samples, args.list_size
        )
    steps["simulator training step (Adam)"] = simulator_training_step(multr, feed, args.list_size, graphed=False)
    if device.type == "cuda":
        steps["simulator training step (Adam, CUDA graph)"] = simulator_training_step(
            multr, feed, args.list_size, graphed=True
        )

    times = interleaved_times(steps, args.steps, args.warmup, device)
    print(
        "batch %d, N=%d, %d features, DNN [512,256,128], %s, %d torch threads, %d interleaved rounds%s"
        % (
            args.batch_size,
            args.list_size,
            args.features,
            device,
            torch.get_num_threads(),
            args.steps,
            ", MULTR hparams: " + args.multr_hparams if args.multr_hparams else "",
        )
    )
    print("| configuration | ms / step (median) | x DLA (median of per-round ratios) | peak memory (MB) | x DLA |")
    print("|---|---|---|---|---|")
    for name, ms in times.items():
        ratio = statistics.median(t / d for t, d in zip(ms, times["DLA"]))
        memory = "| %.0f | %.2f |" % (peaks[name], peaks[name] / peaks["DLA"]) if name in peaks else "| | |"
        print("| %s | %.1f | %.2f %s" % (name, statistics.median(ms), ratio, memory))
    if pass_seconds:
        print(
            "imputation=expected one-off pass (imputation_samples=%d): %s s per 1,000 lists"
            % (expected.hparams.dr.imputation_samples, ", ".join("%.1f" % t for t in pass_seconds))
        )


if __name__ == "__main__":
    main()
