"""Faults tried as a user would (ULTRA's main.py in a subprocess), each answered with a named error.

See docs/failures.md for the list: the fault, what users saw before, what they see now.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from conftest import REPO_ROOT, require_ultra, run_ultra_main

require_ultra()

from ultra_multr.compat.runtime import create_ranking_model  # noqa: E402

CASCADE = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")


def write_settings(tmp_path, base="dla_cascade.json", ranker="hidden_layer_sizes=[16]", algorithm_hparams=None):
    with open(os.path.join(REPO_ROOT, "settings", base)) as handle:
        settings = json.load(handle)
    settings["ranking_model_hparams"] = ranker
    settings["train_input_hparams"] = "click_model_json=%s,seed=0" % CASCADE
    if algorithm_hparams is not None:
        settings["learning_algorithm_hparams"] = algorithm_hparams
    path = tmp_path / ("settings_%s" % base)
    path.write_text(json.dumps(settings))
    return str(path)


def main_args(settings, model_dir, data_dir, *extra, output_dir=None):
    return ["--setting_file", settings, "--data_dir", data_dir, "--model_dir", model_dir,
            "--output_dir", output_dir or model_dir + "/out/", "--batch_size", "16"] + list(extra)


def start_main(ultra_main, args, cwd):
    """main.py in the background (as a second terminal would run it); its stderr goes to <cwd>/background.stderr."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with open(os.path.join(cwd, "background.stderr"), "w") as stderr:
        return subprocess.Popen([sys.executable, ultra_main] + args, cwd=cwd, env=env,
                                stdout=subprocess.DEVNULL, stderr=stderr)


def wait_for(condition, process, cwd, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        if process.poll() is not None:
            with open(os.path.join(cwd, "background.stderr")) as handle:
                raise AssertionError("main.py ended early (exit %s): %s" % (process.returncode, handle.read()[-3000:]))
        time.sleep(0.05)
    raise AssertionError("timed out")


def progress_record(model_dir):
    try:
        with open(os.path.join(model_dir, "ultra_multr.DLA.ckpt.progress.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def kill_at_a_recorded_checkpoint(process, model_dir):
    """SIGKILL main.py at a moment when its checkpoint is complete and recorded (never in the middle of a save)."""
    checkpoint = os.path.join(model_dir, "ultra_multr.DLA.ckpt")
    for _ in range(500):
        process.send_signal(signal.SIGSTOP)
        record = progress_record(model_dir)
        if record.get("checkpoint_sha256") == sha256(checkpoint):
            process.kill()
            process.wait()
            return record
        process.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError("never found main.py between two checkpoint saves")


@pytest.mark.slow
def test_two_trainings_a_killed_one_and_its_checkpoint(ultra_main, synthetic_data_dir, tmp_path):
    """A second training is refused naming the first; after a SIGKILL the lock is stale and the checkpoint unfinished."""
    settings, model_dir, cwd = write_settings(tmp_path), str(tmp_path / "model"), str(tmp_path)
    first = start_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "100000",
                                             "--steps_per_checkpoint", "2"), cwd)
    try:
        wait_for(lambda: progress_record(model_dir).get("checkpoint_step") is not None, first, cwd)
        second = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration",
                                                      "2"), cwd=cwd, check=False)
        assert second.returncode != 0
        assert ("DirLockError: %s is in use by another main.py training: pid %d on host %s since "
                % (model_dir, first.pid, socket.gethostname())) in second.stderr
        record = kill_at_a_recorded_checkpoint(first, model_dir)
    finally:
        first.kill()
        first.wait()
    step = record["checkpoint_step"]  # the last checkpoint main.py saved before the kill
    assert step % 2 == 0 and not record["finished"]

    test = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True"), cwd=cwd)
    assert ("ultra_multr.DLA.ckpt is the checkpoint of an UNFINISHED training (still running, or killed or failed "
            "before the end of its --max_train_iteration 100000); it holds the ranker of step %d, and --test_only scores that ranker" % step
            ) in test.stderr

    # The killed training's lock does not block forever; the restart is then refused for the checkpoint it left.
    restart = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration",
                                                   "2"), cwd=cwd, check=False)
    assert "train.lock: taking over the stale lock of pid %d on %s" % (first.pid, socket.gethostname()) in restart.stderr
    assert "no longer running" in restart.stderr
    assert "of an earlier training with the same data and settings: an UNFINISHED training" in restart.stderr
    assert not os.path.exists(os.path.join(model_dir, "train.lock"))  # released by the refused restart


@pytest.mark.slow
def test_finished_training_then_test_only_with_bad_output_dir_and_bad_checkpoints(ultra_main, synthetic_data_dir, tmp_path):
    settings, model_dir, cwd = write_settings(tmp_path), str(tmp_path / "model"), str(tmp_path)
    run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "2",
                                         "--steps_per_checkpoint", "2"), cwd=cwd)
    record = progress_record(model_dir)
    assert record["finished"] and record["steps_done"] == 4  # main.py stops at the first checkpoint step past 2
    assert record["checkpoint_step"] in (2, 4) and not os.path.exists(os.path.join(model_dir, "train.lock"))

    out = str(tmp_path / "out")  # no trailing '/': main.py would write outtest.ranklist beside an empty out/
    test = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True",
                                                output_dir=out), cwd=cwd)
    assert "--output_dir %r has no trailing '/'" % out in test.stderr
    assert "writing %s/test.ranklist instead" % out in test.stderr
    assert os.path.getsize(os.path.join(out, "test.ranklist")) > 0 and not os.path.exists(out + "test.ranklist")
    assert "is the checkpoint of a finished training of 4 steps; it holds the ranker of step %d" % record[
        "checkpoint_step"] in test.stderr

    checkpoint = os.path.join(model_dir, "ultra_multr.DLA.ckpt")
    with open(checkpoint, "rb") as handle:
        data = handle.read()
    with open(settings) as handle:  # another ranker saved over this one: the record says so
        ranker = create_ranking_model(json.load(handle), 20, torch.device("cpu"))
    torch.save(ranker.state_dict(), checkpoint)
    replaced = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True"),
                              cwd=cwd)
    assert ("is the checkpoint of a finished training of 4 steps, but it holds a file other than the one recorded at "
            "step %d (a ranker saved later, or a file replaced since), and --test_only scores that ranker"
            % record["checkpoint_step"]) in replaced.stderr
    # under the file-size limit, the ranklist of the 12 test queries (~9 kB) named, nothing left (before: "OSError:
    # [Errno 27] File too large" and no path)
    limited = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True",
                                                   output_dir=str(tmp_path / "limited") + "/"),
                             cwd=cwd, check=False, wrapper=file_size_limit(4096))
    assert limited.returncode != 0
    assert ("DiskFullError: [Errno 27] File too large (a file may not grow past this process's file-size limit "
            "(RLIMIT_FSIZE, ulimit -f): 4096 bytes): '%s/limited/test.ranklist'" % tmp_path) in limited.stderr
    assert os.listdir(str(tmp_path / "limited")) == []
    with open(checkpoint, "wb") as handle:  # an empty file: test_model_dir.py
        handle.write(data[: len(data) // 2])
    bad = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True"),
                         cwd=cwd, check=False)
    assert bad.returncode != 0
    assert ("ModelDirError: --test_only: the ranker checkpoint %s cannot be loaded: truncated or not a checkpoint "
            "(%d bytes); torch.load said " % (checkpoint, len(data) // 2)) in bad.stderr
    # training into that dir gives the same advice (it used to say "add --test_only", which says "train again")
    advice = "Delete %s and train into this --model_dir again" % checkpoint
    assert advice in bad.stderr
    retrain = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "2"),
                             cwd=cwd, check=False)
    assert retrain.returncode != 0 and "--test_only True" not in retrain.stderr.splitlines()[-1]
    assert ("ModelDirError: --model_dir %s already holds the ranker checkpoint %s, which cannot be loaded: truncated "
            "or not a checkpoint" % (model_dir, checkpoint)) in retrain.stderr and advice in retrain.stderr


def small_disk(mount_point, size="256k"):
    """A command prefix running the rest in a mount namespace with a tmpfs of ``size`` on ``mount_point``."""
    return ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=%s tmpfs "$0" && exec "$@"' % size, mount_point]


@pytest.fixture
def tmpfs_dir(tmp_path):
    """An empty dir on which each command run under :func:`small_disk` gets its own small tmpfs (skip where
    namespaces are not allowed)."""
    small = tmp_path / "small_disk"
    small.mkdir()
    try:
        probe = subprocess.run(small_disk(str(small), "4k") + ["true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip("cannot run unshare: %s" % error)
    if probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs in a user namespace here: %s" % probe.stderr.strip())
    return str(small)


@pytest.mark.slow
def test_a_full_disk_names_the_simulator_checkpoint(ultra_main, synthetic_data_dir, tmp_path, tmpfs_dir):
    # a simulator of ~800 kB; logger_guard=none: the suite's log orders by the label, so the guard (MULTR's default)
    # would fire and no simulator would be written; simulator_min_heldout_sessions=1: nor would one that too few
    # held-out sessions judge
    settings = write_settings(tmp_path, "multr_dla.json", algorithm_hparams="sample_num=2,simulator_steps=4,"
                              "simulator_batch_size=16,seed=0,rerank_pilot_steps=1,logger_guard=none,"
                              "simulator_min_heldout_sessions=1")
    run = run_ultra_main(ultra_main, main_args(settings, tmpfs_dir, synthetic_data_dir, "--max_train_iteration",
                                               "2"), cwd=str(tmp_path), check=False, wrapper=small_disk(tmpfs_dir))
    assert run.returncode != 0
    assert ("DiskFullError: [Errno 28] No space left on device (the disk is full: 0 bytes free on its file system when "
            "the write failed): '%s/ultra_multr.MULTR.simulator.ckpt" % tmpfs_dir) in run.stderr


def file_size_limit(limit):
    """A command prefix running the rest under the file-size limit (``RLIMIT_FSIZE``) of ``limit`` bytes: a write
    past it fails with EFBIG (Python ignores SIGXFSZ) on any disk, where no namespace may be mounted."""
    return [sys.executable, "-c", "import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d)); "
            "os.execvp(sys.argv[1], sys.argv[1:])" % (limit, limit)]


def no_checkpoint_left(model_dir):
    """Neither a (partial) ranker checkpoint nor a temporary file of one in ``model_dir``."""
    return not [name for name in os.listdir(model_dir) if name.endswith(".ckpt") or name.startswith(".tmp-")]


@pytest.mark.slow
def test_a_full_disk_names_main_pys_ranker_checkpoint(ultra_main, synthetic_data_dir, tmp_path, tmpfs_dir):
    """Before: torch's writer said RuntimeError "unexpected pos", naming neither file nor cause, and left a partial
    checkpoint at the checkpoint's path."""
    settings = write_settings(tmp_path, ranker="hidden_layer_sizes=[1024]")  # a ranker of ~90 kB on a 64 kB disk
    listing = ["sh", "-c", '"$@"; status=$?; echo LISTING: >&2; ls -A "%s" >&2; exit $status' % tmpfs_dir, "sh"]
    run = run_ultra_main(ultra_main, main_args(settings, tmpfs_dir, synthetic_data_dir, "--max_train_iteration",
                                               "2", "--steps_per_checkpoint", "2"),
                         cwd=str(tmp_path), check=False, wrapper=small_disk(tmpfs_dir, "64k") + listing)
    assert run.returncode != 0
    assert ("DiskFullError: [Errno 28] No space left on device (the disk is full: 0 bytes free on its file system when "
            "the write failed): '%s/ultra_multr.DLA.ckpt'" % tmpfs_dir) in run.stderr, run.stderr[-3000:]
    assert "ultra_multr.DLA.ckpt\n" not in run.stderr.split("LISTING:")[-1] and ".tmp-" not in run.stderr.split(
        "LISTING:")[-1]  # written under a temporary name, removed: no partial checkpoint


@pytest.mark.slow
def test_the_file_size_limit_at_main_pys_checkpoint_is_named_through_the_runners_entry_point(
        ultra_main, synthetic_data_dir, tmp_path):
    """Before: torch's writer failed naming neither file nor cause, and left a partial checkpoint; the runner's
    seeded_main runs main.py with runpy."""
    settings = write_settings(tmp_path, ranker="hidden_layer_sizes=[1024]")  # a ranker of ~90 kB
    model_dir = str(tmp_path / "model")
    seeded = subprocess.run(
        file_size_limit(64 << 10) + [sys.executable, "-m", "ultra_multr.experiments.runner.seeded_main", "--seed", "0",
                                     ultra_main]
        + main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "2", "--steps_per_checkpoint", "2"),
        cwd=str(tmp_path), capture_output=True, text=True, timeout=240,
    )
    assert seeded.returncode != 0
    assert ("DiskFullError: [Errno 27] File too large (a file may not grow past this process's file-size limit "
            "(RLIMIT_FSIZE, ulimit -f): 65536 bytes): '%s/ultra_multr.DLA.ckpt'" % model_dir) in seeded.stderr, \
        seeded.stderr[-3000:]
    assert no_checkpoint_left(model_dir)


# main.py run as the runner runs it (runpy), on a disk that is full when TensorBoard writes its first event file: an
# injected ENOSPC in TensorBoard's file layer (our small files before it, the lock and the identity, fit).
_TENSORBOARD_ON_A_FULL_DISK = r"""
import errno, os, runpy, sys
from tensorboard.compat.tensorflow_stub.io import gfile

def write_on_a_full_disk(self, filename, file_content, mode):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

gfile.LocalFileSystem._write = write_on_a_full_disk
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_a_full_disk_at_the_first_write_of_a_training_names_the_event_files_directory_once(
        ultra_main, synthetic_data_dir, tmp_path):
    """Before: TensorBoard's "OSError: [Errno 28] No space left on device" naming no file, its traceback printed
    twice (its writer thread's, then main.py's)."""
    model_dir = str(tmp_path / "model")
    run = subprocess.run([sys.executable, "-c", _TENSORBOARD_ON_A_FULL_DISK, ultra_main]
                         + main_args(write_settings(tmp_path), model_dir, synthetic_data_dir),
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=240)
    assert run.returncode != 0
    assert re.search(r"ultra_multr: TensorBoard could not write its event file %s/train_log/events\.out\.tfevents\.\S+: "
                     r"No space left on device \(the disk is full: \d+ bytes free on its file system when the write "
                     r"failed\); its writer thread stopped at this error, which main\.py's next write, flush or close through it "
                     r"raises\n"
                     % re.escape(model_dir), run.stderr), run.stderr[-3000:]
    assert run.stderr.count(os.path.join(model_dir, "train_log")) == 1  # named once
    assert run.stderr.count("Traceback (most recent call last)") == 1 and "Exception in thread" not in run.stderr


@pytest.mark.slow
def test_test_only_into_a_full_output_dir_names_the_ranklist_and_leaves_none(
    ultra_main, synthetic_data_dir, tmp_path, tmpfs_dir
):
    settings = write_settings(tmp_path)
    model_dir = str(tmp_path / "model")
    run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "2",
                                         "--steps_per_checkpoint", "2"), cwd=str(tmp_path))
    # the ranklist of the 12 test queries (~9 kB) on a 4 kB disk
    run = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True",
                                               output_dir=tmpfs_dir + "/"),
                         cwd=str(tmp_path), check=False, wrapper=small_disk(tmpfs_dir, "4k") + [  # then list the disk
                             "sh", "-c", '"$@"; status=$?; echo LISTING: >&2; ls -A "%s" >&2; exit $status' % tmpfs_dir,
                             "sh"])
    assert run.returncode != 0
    assert "DiskFullError: [Errno 28] No space left on device" in run.stderr
    assert "'%s/test.ranklist'" % tmpfs_dir in run.stderr
    assert run.stderr.split("LISTING:")[-1].strip() == ""  # no 0-byte or partial ranklist, no temporary file


def test_the_atomic_ranklist_is_ultras_byte_for_byte(synthetic_data_dir, tmp_path):
    import ultra
    from ultra_multr.compat.runtime import atomic_output_ranklist

    data = ultra.utils.read_data(synthetic_data_dir, "test", None, 0)
    scores = [[float((7 * q + 3 * d) % 5) - 0.5 * d for d in range(len(docs))] for q, docs in enumerate(data.initial_list)]
    ultra.utils.data_utils.output_ranklist(data, scores, str(tmp_path) + "/ultra_", "test")
    atomic_output_ranklist(data, scores, str(tmp_path) + "/ours_", "test")
    theirs = (tmp_path / "ultra_test.ranklist").read_bytes()
    assert theirs and (tmp_path / "ours_test.ranklist").read_bytes() == theirs


# A step on a full disk: its DiskFullError traceback cannot go to train.stderr.  Then, for seed 0, as when another
# run frees its files, space comes back: failed.json fits, and so does the step's output from then on.  Seed 1 leaves
# the disk full, and its failed.json (with 10 kB of stderr) cannot fit in the page its step.json leaves.
_STEP_FILLING_ITS_DISK = r"""
import atexit, fcntl, json, os, struct, sys, termios, time
from ultra_multr.files import atomic_write_bytes

def wait_until_the_runner_read_our_stderr():
    while struct.unpack("i", fcntl.ioctl(2, termios.FIONREAD, b"0000"))[0]:
        time.sleep(0.01)

def free_the_disk():  # runs after Python printed the traceback
    sys.stderr.flush()
    wait_until_the_runner_read_our_stderr()
    os.write(2, b"(a mark the runner reads only after its write of the traceback failed)\n")
    wait_until_the_runner_read_our_stderr()
    os.close(filler)
    os.remove("filler")
    os.write(2, b"written once the disk had room again\n")

seed = json.load(open("run.json"))["seed"]
if seed == 1:
    sys.stderr.write("a line of the step's log\n" * 400)
filler = os.open("filler", os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(filler, b"0" * 4096)
except OSError:
    pass
if seed == 0:
    atexit.register(free_the_disk)
atomic_write_bytes(os.path.abspath(os.path.join("model", "ultra_multr.DLA.ckpt")), b"0" * 10000)
"""

_RUNNER_ON_A_SMALL_DISK = r"""
import json, logging, shutil, sys
from ultra_multr.experiments.runner.cli import expand_runs, load_config, run_all
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
config = load_config(sys.argv[1])
step = [sys.executable, "-c", sys.argv[2]]
report = run_all(expand_runs(config), config.output_dir, commands=lambda run: [("train", step)], progress=False)
shutil.copytree(config.output_dir, sys.argv[3])  # the small disk ends with this process's namespace
print(json.dumps(report.failed))
"""


@pytest.mark.slow
def test_a_full_disk_cannot_hide_why_a_study_run_failed(tmp_path, tmpfs_dir):
    """The runner reads a step's stderr through a pipe: its last words reach failed.json and the report."""
    config, runner = tmp_path / "study.json", tmp_path / "runner.py"
    config.write_text(json.dumps({"output_dir": tmpfs_dir, "datasets": {"toy": "data"}, "methods": ["dla"],
                                  "seeds": [0, 1]}))
    runner.write_text(_RUNNER_ON_A_SMALL_DISK)
    copy = str(tmp_path / "copy")
    done = subprocess.run(small_disk(tmpfs_dir, "64k") + [sys.executable, str(runner), str(config),
                                                            _STEP_FILLING_ITS_DISK, copy],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_dir = os.path.join(tmpfs_dir, "runs", "toy", "all", "dla", "seed0")
    cause = ("DiskFullError: [Errno 28] No space left on device (the disk is full: 0 bytes free on its file system when "
             "the write failed): '%s/model/ultra_multr.DLA.ckpt'")
    no_room = cause.replace("model/ultra_multr.DLA.ckpt", "failed.json").replace("DiskFullError: ", "")
    cause = cause % run_dir
    copied = os.path.join(copy, "runs", "toy", "all", "dla", "seed0")
    with open(os.path.join(copied, "train.stderr")) as handle:
        stderr_file = handle.read()
    assert "DiskFullError" not in stderr_file and stderr_file.endswith("written once the disk had room again\n")
    with open(os.path.join(copied, "failed.json")) as handle:
        failed = json.load(handle)
    lacking = re.fullmatch(r"step 'train' exited with code 1 \(its stderr: %s/train.stderr lacks (\d+) byte\(s\) of it: "
                           r"\[Errno 28\] No space left on device\)" % re.escape(run_dir), failed["reason"])
    assert lacking and int(lacking.group(1)) > len(cause)
    assert cause + "\n(a mark" in failed["stderr_tail"]
    reported = json.loads(done.stdout)[run_dir]
    assert reported.startswith(failed["reason"] + "; its stderr ended with:\n    ")  # its last 20 lines, indented
    assert cause + "\n    (a mark" in reported
    with open(os.path.join(copy, "runner.log")) as handle:
        assert "FAILED %s: %s" % (run_dir, reported) in handle.read()
    assert "FAILED %s: %s" % (run_dir, reported) in done.stderr  # the console

    # Where failed.json does not fit either, the runner reports that and goes on (the log is on the full disk too).
    run_dir = run_dir.replace("seed0", "seed1")
    reported = json.loads(done.stdout)[run_dir]
    assert reported.startswith("step 'train' exited with code 1 (its stderr: %s/train.stderr" % run_dir)
    assert ("); failed.json could not be written: %s; its stderr ended with:\n" % (no_room % run_dir)) in reported
    assert reported.endswith(cause.replace("seed0", "seed1"))
    assert "FAILED %s: %s" % (run_dir, reported) in done.stderr
    assert not os.path.exists(os.path.join(copied.replace("seed0", "seed1"), "failed.json"))


# -- data ULTRA would read wrongly without a word (docs/failures.md) --------------------------------------------

def copy_of_data(source, tmp_path):
    import shutil

    target = str(tmp_path / "data")
    shutil.copytree(source, target)
    return target + "/"  # main.py joins data_dir + split as strings


def edit_lines(path, edit):
    with open(path) as handle:
        lines = handle.read().splitlines()
    edit(lines)
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


@pytest.mark.slow
def test_a_qid_on_two_lines_of_the_test_split_is_refused_before_main_py_writes_its_ranklist(
        ultra_main, synthetic_data_dir, tmp_path):
    """Before: exit 0, and test.ranklist held the second list's ranking twice (ULTRA keys it by qid)."""
    data_dir = copy_of_data(synthetic_data_dir, tmp_path)
    qid = lambda line: line.split(" ")[0]  # noqa: E731
    for suffix in (".init_list", ".labels"):  # line 5 takes the qid of line 2
        edit_lines(os.path.join(data_dir, "test", "test" + suffix),
                   lambda lines: lines.__setitem__(4, qid(lines[1]) + lines[4][len(qid(lines[4])):]))
    model_dir = str(tmp_path / "model")
    run = run_ultra_main(ultra_main, main_args(write_settings(tmp_path), model_dir, data_dir, "--test_only", "True"),
                         cwd=str(tmp_path), check=False)
    init_list = os.path.join(data_dir, "test", "test.init_list")
    assert run.returncode != 0
    assert re.search(r"DataCheckError: %s:2 and %s:5: query test1 has two lines \(two lists\); ULTRA keys its output "
                     r"test\.ranklist by qid, so it would write the ranking of line 5 twice and lose the one of line 2"
                     % (re.escape(init_list), re.escape(init_list)), run.stderr), run.stderr[-3000:]
    assert not os.path.exists(os.path.join(model_dir, "out", "test.ranklist"))


@pytest.mark.slow
def test_a_tab_separated_feature_line_is_refused_before_training(ultra_main, synthetic_data_dir, tmp_path):
    """Before: exit 0; ULTRA splits on spaces only, so it read the line as one doc id with every feature 0."""
    data_dir = copy_of_data(synthetic_data_dir, tmp_path)
    feature = os.path.join(data_dir, "train", "train.feature")
    edit_lines(feature, lambda lines: lines.__setitem__(6, lines[6].replace(" ", "\t")))
    model_dir = str(tmp_path / "model")
    run = run_ultra_main(ultra_main, main_args(write_settings(tmp_path), model_dir, data_dir,
                                               "--max_train_iteration", "2"), cwd=str(tmp_path), check=False)
    assert run.returncode != 0
    assert re.search(r"DataCheckError: %s:7: a tab \(U\+0009\) at column \d+; ULTRA splits lines on single spaces "
                     r"only, so it would read 'train\S*\\t1:.*' as one field \(the doc id; a line separated by tabs "
                     r"throughout is one doc id and nothing else\)" % re.escape(feature), run.stderr), run.stderr[-3000:]
    assert not os.path.exists(model_dir) or os.listdir(model_dir) == []


@pytest.mark.slow
def test_another_algorithm_is_refused_a_model_dir_holding_a_finished_training(ultra_main, synthetic_data_dir, tmp_path):
    """Before: DLA trained into MULTR's finished model dir exited 0; its session ledger replaced MULTR's and
    train_log/ held both runs' events."""
    # logger_guard=none: on the suite's label-ordered log the guard (MULTR's default) would fire and MULTR's finished
    # training would hold no simulator checkpoint to leave untouched
    multr = write_settings(tmp_path, "multr_dla.json", algorithm_hparams="sample_num=2,simulator_steps=4,"
                           "simulator_batch_size=16,seed=0,rerank_pilot_steps=1,logger_guard=none")
    model_dir, cwd = str(tmp_path / "model"), str(tmp_path)
    run_ultra_main(ultra_main, main_args(multr, model_dir, synthetic_data_dir, "--max_train_iteration", "2",
                                         "--steps_per_checkpoint", "2"), cwd=cwd)
    before = {name: os.path.getmtime(os.path.join(model_dir, name)) for name in os.listdir(model_dir)}
    events = sorted(os.listdir(os.path.join(model_dir, "train_log")))
    dla = run_ultra_main(ultra_main, main_args(write_settings(tmp_path), model_dir, synthetic_data_dir,
                                               "--max_train_iteration", "2"), cwd=cwd, check=False)
    assert dla.returncode != 0
    identity = os.path.join(model_dir, "ultra_multr.MULTR.ckpt.identity.json")
    assert re.search(
        r"ModelDirError: --model_dir %s already holds the training of ultra_multr.MULTR recorded in %s "
        r"\(learning_algorithm_hparams='sample_num=2,.*', ranking_model='ultra.ranking_model.DNN', "
        r"ranking_model_hparams='hidden_layer_sizes=\[16\]'; data_dir=.*\): a finished training of \d+ steps; it holds "
        r"the ranker of step \d+\. One model dir holds one training: this training of ultra_multr.DLA would exit 0 .*"
        r"Pass another --model_dir, or delete %s to train there afresh\."
        % (re.escape(model_dir), re.escape(identity), re.escape(model_dir)), dla.stderr), dla.stderr[-3000:]
    # MULTR's files untouched, no file of DLA's left behind (its lock went with its process)
    assert {name: os.path.getmtime(os.path.join(model_dir, name)) for name in os.listdir(model_dir)} == before
    assert sorted(os.listdir(os.path.join(model_dir, "train_log"))) == events


@pytest.mark.slow
def test_a_misspelt_ranking_model_hparam_is_refused_before_anything_is_written(ultra_main, synthetic_data_dir, tmp_path):
    """Before: ULTRA's DNN printed "Unknown hyperparameter type for hidden_layer_size" and main.py trained its
    default [512, 256, 128] network, exit 0."""
    settings = write_settings(tmp_path, ranker="hidden_layer_size=[16]")
    model_dir = str(tmp_path / "model")
    run = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "2"),
                         cwd=str(tmp_path), check=False)
    assert run.returncode != 0
    assert ("HParamError: ranking_model_hparams of settings file %s (ultra.ranking_model.DNN): unknown hyper-parameter "
            "'hidden_layer_size' (did you mean 'hidden_layer_sizes'?); known: activation_func, hidden_layer_sizes, norm"
            % settings) in run.stderr, run.stderr[-3000:]
    assert "Unknown hyperparameter type" not in run.stdout  # refused before ULTRA's DNN parsed it
    assert not os.path.exists(model_dir)
