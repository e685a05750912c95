"""Why DLA's loss turns non-finite without the DNN's layer normalisation: the within-list score spread after a few
Adagrad updates of ULTRA's DNN [512, 256, 128] with ``norm=none``, on raw and on standardised features.

    python studies/baidu_raw_features/score_spread.py --log-files 'LOG/parts/part-1_split-*.feather'
        [--learning-rates 0.05 0.01 0.002] [--updates 4] [--batch 64] [--out studies/baidu_raw_features/results]

DLA weights its examination loss by ``p_1 / p_k`` with ``p`` the softmax of the ranker's scores in a list, i.e.
``exp(s_1 - s_k)``, which overflows float32 once a list's scores spread over about 88.7; then inf / inf gives NaN.
This trains the ranker alone with a listwise softmax loss on the first ``--batch`` sessions of the first file (the
same batch every update; seed 0, gradient norm clipped at 5 as our algorithms do) and writes, per features and
learning rate, the largest within-list score spread before each update (``score_spread.csv``).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch

from ultra.ranking_model.DNN import DNN
from ultra_multr.click_logs import baidu, standardize


def spreads(features, mask, clicks, learning_rate: float, updates: int):
    torch.manual_seed(0)
    model = DNN("hidden_layer_sizes=[512,256,128],norm=none", features.shape[-1])
    optimizer = torch.optim.Adagrad(model.sequential.parameters(), lr=learning_rate)
    found = []
    for _ in range(updates):
        scores = torch.cat(model.build([features[:, i, :] for i in range(features.shape[1])]), 1)
        top = scores.masked_fill(~mask, -float("inf")).max(1).values
        bottom = scores.masked_fill(~mask, float("inf")).min(1).values
        found.append(float((top - bottom).max().detach()))
        loss = -(torch.log_softmax(scores.masked_fill(~mask, -1e9), 1) * clicks).sum() / len(clicks)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.sequential.parameters(), 5.0)
        optimizer.step()
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log-files", required=True, help="glob patterns of the training click files, ';'-separated")
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[0.05, 0.01, 0.002])
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args(argv)
    files = baidu.log_files([p for p in args.log_files.split(";") if p.strip()])
    sessions = baidu.read_sessions(files[0])
    stats = standardize.fit_files(files)
    mask = torch.from_numpy(sessions.mask[:args.batch])
    clicks = torch.from_numpy(sessions.clicks[:args.batch])
    rows = []
    for name, values in (("raw (signed log1p)", sessions.features), ("standardised", stats.apply(sessions.features, sessions.mask))):
        features = torch.from_numpy(values[:args.batch]).float()
        for learning_rate in args.learning_rates:
            found = spreads(features, mask, clicks, learning_rate, args.updates)
            rows.append([name, "%g" % learning_rate] + ["%.1f" % v for v in found])
            print(rows[-1], flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "score_spread.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["features", "learning rate"] + ["spread before update %d" % (i + 1) for i in range(args.updates)])
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
