"""Data checks: every problem is named with its file and line (or split)."""
from __future__ import annotations

import os
import re

import pytest
from conftest import REPO_ROOT, main_py_in_process, require_ultra

from ultra_multr.data.checks import DataCheckError, check_data_dir, main
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset


@pytest.fixture
def data_dir(tmp_path):
    return write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 6, "valid": 3, "test": 3}, n_features=8)


def path_of(data_dir, split, suffix):
    return os.path.join(data_dir, split, split + suffix)


def edit_line(path, number, edit):
    with open(path) as handle:
        lines = handle.read().split("\n")
    lines[number - 1] = edit(lines[number - 1])
    with open(path, "w") as handle:
        handle.write("\n".join(lines))


def test_clean_data_passes_with_counts(data_dir):
    summaries = check_data_dir(data_dir)
    assert set(summaries) == {"train", "valid", "test"}
    assert summaries["train"].queries == 6 and summaries["train"].kept_queries == 6
    assert summaries["valid"].documents >= 6 * 3


@pytest.mark.parametrize(
    "split, suffix, line, edit, message",
    [
        ("test", ".feature", 4, lambda s: s + " 9:0.5", r"test\.feature:4: feature index 9 is outside 0\.\.8 .*silently drop"),
        ("train", ".feature", 2, lambda s: s.split(" ")[0] + " 0:0.5 3:1 8:0.2",
         r"train\.feature:2: the line holds feature index 0 and feature index 8 \(feature_size\); .*overwrite"),
        ("train", ".feature", 3, lambda s: s.split(" ")[0] + " 2:0.5 -1:1", r"train\.feature:3: feature index -1 is negative; .*misplace"),
        ("valid", ".feature", 3, lambda s: s.split(" ")[0] + " 4:0.5 4:1", r"valid\.feature:3: feature index 4 appears twice"),
        ("valid", ".feature", 4, lambda s: s.split(" ")[0] + " 2.0:0.5", r"valid\.feature:4: feature index '2\.0' is not an integer"),
        ("test", ".feature", 3, lambda s: s.split(" ")[0] + " 2:nan", r"test\.feature:3: value of feature 2 is 'nan'; expected a finite"),
        ("train", ".feature", 5, lambda s: s.split(" ")[0] + " 3:-inf", r"train\.feature:5: value of feature 3 is '-inf'"),
        ("valid", ".feature", 1, lambda s: s.replace(" ", "  ", 1), r"valid\.feature:1: field '' is not 'index:value'"),
        ("valid", ".feature", 2, lambda s: s.split(" ")[0] + " 2:abc", r"valid\.feature:2: value 'abc' of feature 2 is not a number"),
        ("valid", ".feature", 2, lambda s: "", r"valid\.feature:2: empty line"),
        ("train", ".init_list", 2, lambda s: s + " 99999", r"train\.init_list:2: query train1 lists document index 99999; expected 0\.\.\d+"),
        ("train", ".labels", 3, lambda s: s + " 1", r"train\.labels:3: query train2 with \d+ labels; expected query train2 with"),
        ("test", ".labels", 1, lambda s: s.split(" ")[0] + " 7" + s[s.index(" ") + 2:], r"test\.labels:1: query test0 has label 7\.0; expected 0\.\.4"),
        ("test", ".labels", 2, lambda s: s + "x", r"test\.labels:2: label '\d+x' is not a number"),
    ],
)
def test_each_problem_names_file_line_and_expectation(data_dir, split, suffix, line, edit, message):
    edit_line(path_of(data_dir, split, suffix), line, edit)
    with pytest.raises(DataCheckError, match=message):
        check_data_dir(data_dir)


def test_a_cut_short_last_line_is_named(data_dir):
    path = path_of(data_dir, "train", ".feature")
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(text[:-7])  # cut inside the last line
    n_lines = text.count("\n")
    with pytest.raises(DataCheckError, match=r"train\.feature:%d: the last line does not end in a newline" % n_lines):
        check_data_dir(data_dir)


def test_an_empty_split_is_named(data_dir):
    path = path_of(data_dir, "valid", ".labels")
    with open(path) as handle:
        lines = handle.read().splitlines()
    with open(path, "w") as handle:  # every label 0: ULTRA keeps no query
        handle.write("".join(l.split(" ")[0] + " 0" * (len(l.split(" ")) - 1) + "\n" for l in lines))
    with pytest.raises(DataCheckError, match=r"split 'valid' .*none of its 3 queries .*No valid query has been found"):
        check_data_dir(data_dir)
    for suffix in (".feature", ".init_list", ".labels"):
        open(path_of(data_dir, "test", suffix), "w").close()
    with pytest.raises(DataCheckError, match=r"split 'test' .*none of its 0 queries"):
        check_data_dir(data_dir, ["test"])


def test_settings_are_checked(data_dir):
    path = os.path.join(data_dir, "settings.json")
    with open(path, "w") as handle:
        handle.write('{"feature_size": 8, "max_label": 4,}')
    with pytest.raises(DataCheckError, match=r"settings\.json: not valid JSON"):
        check_data_dir(data_dir)
    with open(path, "w") as handle:
        handle.write('{"feature_size": "8", "max_label": 4}')
    with pytest.raises(DataCheckError, match=r"settings\.json: feature_size must be a positive integer, got '8'"):
        check_data_dir(data_dir)


def test_errors_found_past_the_first_block(data_dir, monkeypatch):
    import ultra_multr.data.checks as checks
    from ultra_multr.data import feature_fields

    monkeypatch.setattr(feature_fields, "BLOCK_BYTES", 64)  # many blocks, lines split across reads
    assert checks.check_data_dir(data_dir)["train"].queries == 6
    edit_line(path_of(data_dir, "train", ".feature"), 30, lambda s: s + " 12:1")
    with pytest.raises(DataCheckError, match=r"train\.feature:30: feature index 12"):
        checks.check_data_dir(data_dir)


def test_command_line(data_dir, capsys):
    assert main([data_dir]) == 0
    assert "data checks passed" in capsys.readouterr().out
    edit_line(path_of(data_dir, "test", ".feature"), 1, lambda s: s + " 1:inf")
    assert main([data_dir, "--splits", "test"]) == 1
    assert "test.feature:1:" in capsys.readouterr().err


# -- data preparation calls the checks ----------------------------------------

def write_letor_splits(tmp_path, valid_labels=(2, 0, 1)):
    paths = {}
    for split, labels in (("train", (2, 0, 1)), ("valid", valid_labels), ("test", (1, 0, 0))):
        lines = ["%d qid:%s%d 1:%g 2:%g #docid = %s%d-%d" % (y, split, q, 0.1 * i + q, y - 0.05 * q, split, q, i)
                 for q in range(3) for i, y in enumerate(labels)]
        paths[split] = str(tmp_path / ("%s.txt" % split))
        with open(paths[split], "w") as handle:
            handle.write("\n".join(lines) + "\n")
    return paths


def prepare(paths, out):
    from ultra_multr.data.prepare import main as prepare_main

    return prepare_main(["splits", "--svm-fraction", "1", "--out", str(out)] + [a for s in ("train", "valid", "test") for a in ("--" + s, paths[s])])


def test_prepare_checks_its_output_and_refuses_cut_short_input(tmp_path, capsys):
    paths = write_letor_splits(tmp_path)
    assert prepare(paths, tmp_path / "ok") == 0
    assert check_data_dir(str(tmp_path / "ok"))["valid"].kept_queries == 3
    with open(paths["test"], "rb+") as handle:  # a copy that stopped mid-line: "...2:-0.1" -> "...2:-0."
        handle.truncate(os.path.getsize(paths["test"]) - 30)
    assert prepare(paths, tmp_path / "cut") == 2
    assert "test.txt: the last line does not end in a newline" in capsys.readouterr().err
    assert not (tmp_path / "cut").exists()


def test_prepare_names_a_split_ultra_would_find_empty(tmp_path, capsys):
    paths = write_letor_splits(tmp_path, valid_labels=(0, 0, 0))
    assert prepare(paths, tmp_path / "out") == 2
    assert "split 'valid'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unusual_but_valid_lines_pass(data_dir):
    path = path_of(data_dir, "train", ".feature")
    edit_line(path, 1, lambda s: s.split(" ")[0] + " 1:1e-05 2:+0.5 3:5. 4:-.25 8:1E+2 ")  # trailing space: ULTRA strips
    edit_line(path, 2, lambda s: s.split(" ")[0])  # a document without features
    assert check_data_dir(data_dir)["train"].documents > 6
    edit_line(path, 3, lambda s: s.split(" ")[0] + " 5:1e999")  # overflows to inf
    with pytest.raises(DataCheckError, match=r"train\.feature:3: value of feature 5 is '1e999'"):
        check_data_dir(data_dir)


# -- ULTRA's semantics of feature index 0 ---------------------------------------

def zero_index_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "feature index 0" in r.getMessage()]


@pytest.mark.parametrize("fields", ["0:0.5 1:0.25 3:1", "3:1 0:0.5 1:0.25"], ids=["sorted (fast path)", "unsorted (line by line)"])
def test_feature_index_zero_is_accepted_with_one_warning_per_file(data_dir, caplog, fields):
    path = path_of(data_dir, "train", ".feature")
    for line in (2, 5, 9):
        edit_line(path, line, lambda s: s.split(" ")[0] + " " + fields)
    assert check_data_dir(data_dir)["train"].documents > 9
    warnings = zero_index_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(path + ": 3 line(s) use feature index 0 (first at line 2)")
    assert "the last slot, the one of feature index 8 (feature_size)" in warnings[0]


def test_ultra_toy_data_as_shipped_is_accepted_with_one_warning_per_file(caplog):
    from conftest import require_ultra

    ultra = require_ultra()
    toy = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "tests", "data", "")
    summaries = check_data_dir(toy)
    assert {split: s.kept_queries for split, s in summaries.items()} == {"train": 20, "valid": 6, "test": 6}
    warnings = zero_index_warnings(caplog)
    assert [w.split(":")[0] for w in warnings] == [path_of(toy, split, ".feature") for split in ("train", "valid", "test")]
    assert "11 line(s) use feature index 0 (first at line 8)" in warnings[0]


# -- the libsvm layout ----------------------------------------------------------

@pytest.fixture
def libsvm_dir(tmp_path):
    return write_synthetic_ultra_dataset(
        str(tmp_path / "libsvm"), {"train": 6, "valid": 3, "test": 3}, n_features=8, layout="libsvm"
    )


def test_libsvm_layout_is_checked_as_ultra_reads_it(libsvm_dir):
    summaries = check_data_dir(libsvm_dir)
    assert {s.layout for s in summaries.values()} == {"libsvm"}
    assert summaries["train"].queries == 6 and summaries["train"].kept_queries == 6


def test_a_libsvm_qid_in_two_separate_blocks_is_refused_naming_both(libsvm_dir):
    """ULTRA's reader merges the lines of a qid wherever they are: two blocks (colliding qids of two files
    concatenated) would silently become one query."""
    path = path_of(libsvm_dir, "train", ".txt")
    with open(path) as handle:
        lines = handle.read().splitlines()
    first_block = sum(1 for line in lines if line.split(" ")[1] == lines[0].split(" ")[1])
    with open(path, "w") as handle:
        handle.write("\n".join(lines[1:] + lines[:1]) + "\n")
    with pytest.raises(DataCheckError, match=r"train\.txt:1-%d and \S+train\.txt:%d: query train0 appears in two "
                       r"separate blocks of lines .*silently merge them into one query"
                       % (first_block - 1, len(lines))):
        check_data_dir(libsvm_dir)


def test_a_libsvm_query_longer_than_max_list_cutoff_is_refused_by_main_py_and_the_cli(
        libsvm_dir, ultra_main, tmp_path, monkeypatch):
    """Before: ULTRA's libsvm reader skips the features of a query's lines past --max_list_cutoff but keeps
    numbering documents by line, so the later documents pointed at other lines' features; the checks passed it,
    training exited 0 (or failed with an IndexError), --test_only failed with an IndexError."""
    require_ultra()
    path = path_of(libsvm_dir, "train", ".txt")
    with open(path) as handle:
        first_qid = [line.split(" ")[1] for line in handle.read().splitlines()][:6]
    assert len(set(first_qid)) == 1  # the first query has 6 lines or more
    refusal = (r"%s:6: query train0 has more lines than --max_list_cutoff 5; ULTRA's libsvm reader skips the features "
               r"of the lines past the cutoff but keeps numbering documents by line, so every later document of the "
               r"split would be read with another line's features" % re.escape(path))
    assert main([libsvm_dir, "--max_list_cutoff", "5"]) == 1 and main([libsvm_dir]) == 0
    with pytest.raises(DataCheckError, match=refusal):
        check_data_dir(libsvm_dir, list_cutoff=5)
    settings = tmp_path / "settings.json"
    with open(os.path.join(REPO_ROOT, "settings", "dla_cascade.json")) as handle:
        settings.write_text(handle.read().replace("[512,256,128]", "[8]").replace(
            "click_models/", os.path.join(REPO_ROOT, "settings", "click_models", "")))
    refused = main_py_in_process(ultra_main, ["--setting_file", str(settings), "--data_dir", libsvm_dir,
                                              "--model_dir", str(tmp_path / "model"), "--max_list_cutoff", "5",
                                              "--selection_bias_cutoff", "5"], monkeypatch)
    assert isinstance(refused, DataCheckError) and re.match(refusal, str(refused)), refused


@pytest.mark.parametrize(
    "line, edit, message",
    [
        (2, lambda s: s + " #docid = GX001", r"train\.txt:2: a '#' comment \('#docid = GX001'\); ULTRA's libsvm reader cannot"),
        (3, lambda s: "1.5" + s[1:], r"train\.txt:3: label '1\.5' is not an integer"),
        (4, lambda s: "7" + s[1:], r"train\.txt:4: query train\d has label 7\.0; expected 0\.\.4"),
        (5, lambda s: s.replace("qid:", "id="), r"train\.txt:5: second field 'id=train\d' is not 'qid:Q'"),
        (6, lambda s: s + " 9:1", r"train\.txt:6: feature index 9 is outside 0\.\.8"),
        (7, lambda s: " ".join(s.split(" ")[:2]) + " 0:1 8:2", r"train\.txt:7: the line holds feature index 0 and feature index 8"),
        (8, lambda s: "", r"train\.txt:8: expected 'label qid:Q index:value \.\.\.'"),
    ],
)
def test_each_libsvm_problem_names_file_and_line(libsvm_dir, line, edit, message):
    edit_line(path_of(libsvm_dir, "train", ".txt"), line, edit)
    with pytest.raises(DataCheckError, match=message):
        check_data_dir(libsvm_dir)


def test_a_split_in_neither_layout_is_named(libsvm_dir):
    os.remove(path_of(libsvm_dir, "valid", ".txt"))
    with pytest.raises(DataCheckError, match=r"split 'valid': neither .*valid\.feature \(ULTRA's format\) nor .*valid\.txt"):
        check_data_dir(libsvm_dir)


# -- one read serves the checks and the fingerprints ------------------------------

def test_the_fingerprint_comes_from_the_checks_read_and_notices_a_changed_file(data_dir, monkeypatch):
    from ultra_multr.data import checks, feature_fields

    check_data_dir(data_dir, ["train", "valid"])
    reads = []
    real = feature_fields.line_blocks
    monkeypatch.setattr(checks, "line_blocks", lambda path, digest: reads.append(path) or real(path, digest))
    first = checks.data_fingerprint(data_dir, ["train", "valid"])
    assert reads == []  # nothing read again
    path = path_of(data_dir, "valid", ".labels")
    edit_line(path, 1, lambda s: s.split(" ")[0] + " 0" + s[s.index(" ") + 2:])
    os.utime(path, ns=(0, 0))  # a different modification time even on a coarse clock
    second = checks.data_fingerprint(data_dir, ["train", "valid"])
    assert second != first and path in reads


# -- separators ULTRA does not split on; a qid on two lines -----------------------

@pytest.mark.parametrize(
    "split, suffix, line, edit, message",
    [
        ("train", ".feature", 2, lambda s: s.replace(" ", "\t"),
         r"train\.feature:2: a tab \(U\+0009\) at column \d+; ULTRA splits lines on single spaces only, so it would "
         r"read '\S+\\t1:[^']*' as one field \(the doc id; a line separated by tabs throughout is one doc id"),
        ("valid", ".feature", 3, lambda s: s.replace(" ", "\t", 2).replace("\t", " ", 1),
         r"valid\.feature:3: a tab \(U\+0009\) at column \d+; .*read '1:[^']*\\t2:[^']*' as one field\. Separate"),
        ("test", ".feature", 1, lambda s: s.replace(" ", "\u00a0", 1), r"test\.feature:1: a no-break space \(U\+00A0\)"),
        ("train", ".feature", 4, lambda s: s.replace(" ", "\r", 1), r"train\.feature:4: a carriage return .*universal newlines"),
        ("train", ".init_list", 2, lambda s: s.replace(" ", "\t", 1), r"train\.init_list:2: a tab .*\(the qid;"),
        ("valid", ".labels", 1, lambda s: s.replace(" ", "\x0b"), r"valid\.labels:1: a vertical tab \(U\+000B\)"),
    ],
)
def test_whitespace_ultra_does_not_split_on_is_refused_with_file_and_line(data_dir, split, suffix, line, edit, message):
    edit_line(path_of(data_dir, split, suffix), line, edit)
    with pytest.raises(DataCheckError, match=message):
        check_data_dir(data_dir)


def test_crlf_line_ends_and_whitespace_at_either_end_pass(data_dir):
    """ULTRA reads text with universal newlines and strips each line: these are read as intended."""
    path = path_of(data_dir, "train", ".feature")
    with open(path, "rb") as handle:
        text = handle.read()
    with open(path, "wb") as handle:
        handle.write(text.replace(b"\n", b"\r\n"))
    edit_line(path_of(data_dir, "valid", ".feature"), 2, lambda s: "\t" + s + "\t")
    edit_line(path_of(data_dir, "valid", ".init_list"), 1, lambda s: s + "\t")
    assert check_data_dir(data_dir)["train"].queries == 6


def test_a_libsvm_line_with_tabs_is_refused_before_its_label_is_read(libsvm_dir):
    edit_line(path_of(libsvm_dir, "train", ".txt"), 3, lambda s: s.replace(" ", "\t"))
    with pytest.raises(DataCheckError, match=r"train\.txt:3: a tab \(U\+0009\) at column 2; .*\(the label;"):
        check_data_dir(libsvm_dir)


def test_a_qid_on_two_init_list_lines_of_the_ranked_split_is_refused_naming_both(data_dir):
    """ULTRA keys test.ranklist by qid: the ranking of the later line would be written twice, the other lost.
    Another split may repeat a qid (a click log: one line per logged session)."""
    for split in ("train", "test"):
        for suffix in (".init_list", ".labels"):
            edit_line(path_of(data_dir, split, suffix), 3, lambda s: split + "0" + s[s.index(" "):])
    assert check_data_dir(data_dir)["train"].queries == 6
    init_list = path_of(data_dir, "test", ".init_list")
    with pytest.raises(DataCheckError, match=r"%s:1 and %s:3: query test0 has two lines \(two lists\); ULTRA keys its "
                       r"output test\.ranklist by qid, so it would write the ranking of line 3 twice and lose the one "
                       r"of line 1" % (re.escape(init_list), re.escape(init_list))):
        check_data_dir(data_dir, ranklist_split="test")
    # the command line checks what main.py checks: the test split as main.py --test_only ranks it (it passed this)
    assert main([data_dir]) == 1 and main([data_dir, "--ranklist_split", ""]) == 0


def test_a_split_that_passed_under_older_rules_is_checked_again(data_dir, monkeypatch):
    """A cached pass of rules that did not look at separators is not reused (check_cache.RULES_VERSION)."""
    from ultra_multr.data import check_cache, feature_fields

    monkeypatch.setattr(check_cache, "RULES_VERSION", 1)
    monkeypatch.setattr(feature_fields, "check_separators", lambda *args: None)  # the rules of version 1
    path = path_of(data_dir, "train", ".feature")
    edit_line(path, 2, lambda s: s.replace(" ", "\t"))
    check_data_dir(data_dir)  # the old rules passed it (and cached the pass)
    monkeypatch.undo()
    with pytest.raises(DataCheckError, match=r"train\.feature:2: a tab"):
        check_data_dir(data_dir)
