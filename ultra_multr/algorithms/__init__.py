"""ULTRA learning-algorithm adapters: thin classes over ultra_multr's torch math, one algorithm per module.

Select each as ``"learning_algorithm": "ultra_multr.<Name>"``; the math is in
:mod:`ultra_multr.losses`.

* :mod:`.dla` DLA; :mod:`.multr` MULTR (the doubly-robust plug-in on DLA);
* the baselines of the paper's Table 2: :mod:`.naive` (Naive, and the Oracle
  when the feed gives labels), :mod:`.rem` (Regression EM), :mod:`.paird`
  (Pairwise Debiasing), :mod:`.pal` (PAL), :mod:`.ipw` (IPW with given
  propensities);
* :mod:`.multr_ipw`: MULTR's plug-in on IPW instead of DLA.

What the ULTRA originals (commit 1757587) get wrong and these do not: every
loss, posterior and bias estimate ignores padded slots (ULTRA averages or
pairs them as documents); one device throughout (ULTRA moves tensors to CUDA
whenever it exists, PairD's sampler always); optimizers are created once;
PairD's bias estimate of a position without pairs in the batch stays put
(ULTRA shrinks it towards 0 and then divides by it).  Loss reductions are
means over queries or valid slots (ULTRA's PairD sums over the batch).
"""
