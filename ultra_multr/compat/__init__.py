"""Everything ultra_multr does about ULTRA_pytorch's defects, in one place.

ULTRA_pytorch at commit 1757587f (the commit this plugin targets) breaks on
current torch / numpy in known ways.  We never edit ULTRA; each defect is
handled here:

====================================================  =========================================
ULTRA defect                                          handled by
====================================================  =========================================
``base_ranking_model.py`` imports TensorFlow          :mod:`.startup` (interpreter-start hook)
(unused); ``import ultra`` fails without it
``create_input_feed`` casts a list of float32         :func:`ultra_multr.batch.batch_from_input_feed`
arrays to int64 and raises TypeError                  (our algorithms never call ULTRA's)
``main.py`` makes a tensorboard writer per step for   our algorithms return an empty train
every key of a non-empty train summary                summary (:data:`.runtime.EMPTY_SUMMARY`)
DLA creates a ``SummaryWriter()`` per instance        our algorithms never call ULTRA's
                                                      ``DLA.__init__``
models pick CUDA whenever present (module-level       :func:`.runtime.score_documents`,
``torch.device('cuda')`` in DNN / Linear)              :func:`.runtime.choose_device`
``metrics.py`` computes on CUDA whenever CUDA exists  :func:`.runtime.ranking_metrics` hands it
(module-level ``device``), whatever the model's       tensors on :func:`.runtime.ultra_metric_device`
``main.py`` loads the ranker with ``torch.load`` and  :func:`.runtime.create_ranking_model`: the
no ``map_location``                                   ranker's ``state_dict()`` holds CPU tensors
``main.py`` silently tests a random ranker without a  :func:`.model_dir.check_model_dir`
checkpoint and reloads only the ranker's weights
when training in a model dir that holds one
click-model JSON paths are relative to the CWD        :func:`.runtime.resolve_data_path`
``--test_only False`` means True (argparse            :func:`.runtime.check_main_flags`
``type=bool``)
DLA's ``max_propensity_weight`` clamps ``.grad`` of   :func:`ultra_multr.losses.ipw_weights`
the weights, never the weights
DLA rebuilds Adagrad every step (sign-SGD)            :class:`ultra_multr.algorithms.base.Optimizers`
``main.py --test_only`` writes ``str(score)`` into     ``PluginAlgorithm.validation`` returns
its ranklist: ``tensor(-1.31)`` for torch scores      numpy scores
the reader drops feature indices > feature_size,      :mod:`ultra_multr.data.checks` (from our
overwrites a repeated index (and index 0 with         algorithms, data preparation, and
feature_size: 0 lands in the last slot), reads        :mod:`.startup`'s exception hook), on
nan/inf, crashes on libsvm comments, says only "No    ULTRA's and the libsvm layout; index 0
valid query has been found."; main.py's settings      alone is accepted with a warning
JSON errors name no file
two ``main.py`` trainings into one ``--model_dir``    :func:`.model_dir.lock_for_training`
both run and exit 0                                   (``<model_dir>/train.lock``)
``main.py --test_only`` scores the checkpoint of a    :mod:`.progress` (``*.ckpt.progress.json``)
killed training; its ``torch.load`` of a truncated    and :func:`.model_dir.check_checkpoint_loads`
or empty checkpoint names no file
``--output_dir out`` writes ``outtest.ranklist``      :func:`.runtime.mend_output_dir`
(``output_dir + "test.ranklist"``)
``main.py``'s ``torch.save`` on a full disk says      :func:`.main_py_start.save_checkpoints_atomically`
"unexpected pos" / "basic_ios::clear", no file, and    (serialised in memory, written under a temporary
leaves a partial checkpoint                           name and renamed; the error names the file)
TensorBoard's writer thread on a full disk: its       :mod:`.startup`'s thread and exception hooks
traceback twice, no file                              (one line naming the event file)
``main.py`` fails on ``--batch_size 0``,              :func:`.runtime.check_main_flags`, from
``--steps_per_checkpoint 0`` and any                  :func:`.main_py_start.check_main_py_start`
``--test_while_train`` (its test read passes          (before main.py's first read)
``--max_list_cutoff`` as ``--click_model_dir``;
``test_summary.items`` is not called)
settings keys read late: a missing key, a misspelt    :func:`.settings_check.check_settings_file`, from
class path, metric or ``objective_metric`` (which     :func:`.main_py_start.check_main_py_start`
keeps the last checkpoint without a word)
the libsvm reader with ``--max_list_cutoff`` skips    :mod:`ultra_multr.data.checks` (a query longer
a cut line's features but numbers documents by line   than the cutoff is refused)
``main.py --test_only`` writes its ranklist line by    :func:`.runtime.write_ranklist_atomically`
line: a full disk leaves a 0-byte or partial one      (written under a temporary name, renamed;
and "[Errno 28]" with no path                         the error names the ranklist)
``HParams.parse`` only prints an unknown name: a      :mod:`.settings_check` (from our algorithms
misspelt ``ranking_model_hparams`` name trains the    and feeds), names the closest known name
default network
the reader keeps every feature as a Python float (40  :mod:`ultra_multr.data.compact_reader`: one
bytes; 0.67 MB per query at 700 features, ~15 GB at   float32 matrix per split, installed by
Yahoo's size) and parses one float at a time          :mod:`.startup` (``ULTRA_MULTR_COMPACT_READER=0``:
                                                      ULTRA's reader)
====================================================  =========================================

:mod:`.startup` uses the standard library only; :mod:`.runtime` needs torch
and ULTRA and is imported by the adapter classes; :mod:`.main_py_start` runs at main.py's first ``read_data``.
"""
