"""The docs match the tree: one index that lists every page and study, a layout page that names every module,
links that resolve, and no internal issue numbers in page titles."""
from __future__ import annotations

import os
import re
from typing import List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "ultra_multr")


def read(path: str) -> str:
    with open(os.path.join(REPO, path)) as handle:
        return handle.read()


#: The folders this repository writes (not ULTRA's copy, virtual environments or build outputs).
OURS = ("docs", "studies", "benchmarks", "example", "settings", "tests", "ultra_multr")


def our_files() -> List[str]:
    """Repository-relative paths of README.md and every file under :data:`OURS`."""
    found = ["README.md"]
    for top in OURS:
        for folder, folders, files in os.walk(os.path.join(REPO, top)):
            folders[:] = [f for f in folders if not f.startswith((".", "__pycache__"))]
            found += [os.path.relpath(os.path.join(folder, f), REPO) for f in files]
    return found


def markdown_files() -> List[str]:
    return [path for path in our_files() if path.endswith(".md")]


def test_the_index_lists_every_topic_page_and_every_study():
    index = read("docs/README.md")
    pages = sorted(name for name in os.listdir(os.path.join(REPO, "docs")) if name.endswith(".md"))
    missing = [name for name in pages if name != "README.md" and "](%s)" % name not in index]
    studies = sorted(os.listdir(os.path.join(REPO, "studies")))
    missing += ["studies/" + name for name in studies if "](../studies/%s/README.md)" % name not in index]
    assert not missing, "docs/README.md does not list: %s" % ", ".join(missing)
    assert "](docs/README.md)" in read("README.md")


def test_the_layout_page_names_every_module_and_package():
    layout = read("docs/layout.md")
    named = set(re.findall(r"`([^`]+)`", layout))
    words = {part for token in named for part in re.split(r"[\s,]+", token)}
    missing = []
    for folder, _, files in os.walk(PACKAGE):
        relative = os.path.relpath(folder, PACKAGE)
        last = os.path.basename(relative) + "/"
        if relative != "." and not any(w == last or w.startswith(relative + "/") for w in words):
            missing.append(relative + "/")
        for name in files:
            if name.endswith(".py") and name not in ("__init__.py", "__main__.py"):
                path = name if relative == "." else relative + "/" + name
                if not any(word == name or word.endswith("/" + name) and path.endswith(word) for word in words):
                    missing.append(path)
    assert not missing, "docs/layout.md does not name: %s" % ", ".join(sorted(missing))


def test_every_file_the_layout_page_names_exists():
    listed = our_files()
    paths = set(listed) | {os.path.dirname(p) + "/" for p in listed}
    for token in re.findall(r"`([^`\s]+\.(?:py|sh|md)|[a-z_]+/)`", read("docs/layout.md")):
        exists = any(p == token or p.endswith("/" + token) or p.startswith(token) for p in paths)
        assert exists, "docs/layout.md names %s, which is not in the tree" % token


def test_relative_links_resolve():
    broken = []
    for path in markdown_files():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read(path)):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(REPO, os.path.dirname(path), target))):
                broken.append("%s -> %s" % (path, target))
    assert not broken, "\n".join(broken)


def test_page_titles_carry_no_issue_numbers():
    pages = [p for p in markdown_files() if p.startswith(("docs/", "studies/")) and "/results/" not in p or p == "README.md"]
    titled = [p for p in pages if re.search(r"issue \d", read(p).splitlines()[0] if read(p) else "", re.I)]
    assert not titled, "page titles with an issue number: %s" % ", ".join(titled)


#: A path into this repository's own folders (ULTRA's checkout has an example/ folder too: left out).
REPO_PATH = re.compile(r"(?<![\w/.-])((?:docs|studies|benchmarks|settings)/[\w./-]*\w\.(?:md|json|py|sh|csv))")


def test_every_repository_path_a_python_file_names_exists():
    """Docstrings and comments point readers to pages and files; a page renamed or removed leaves them pointing
    nowhere (MULTR's docstrings named two pages merged into others long after)."""
    missing = []
    for path in our_files():
        if path.endswith(".py"):
            for line_number, line in enumerate(read(path).splitlines(), 1):
                missing += ["%s:%d: %s" % (path, line_number, m.group(1)) for m in REPO_PATH.finditer(line)
                            if not os.path.exists(os.path.join(REPO, m.group(1)))]
    assert not missing, "\n".join(missing)


def _table_after(text: str, heading: str) -> List[str]:
    """The first Markdown table after ``heading``, its lines."""
    after = text[text.index(heading):].splitlines()
    start = next(i for i, line in enumerate(after) if line.startswith("|"))
    end = next((i for i in range(start, len(after)) if not after[i].startswith("|")), len(after))
    return after[start:end]


def test_the_baidu_study_page_holds_the_differences_table_of_the_click_log_docs():
    docs = _table_after(read("docs/click_logs.md"), "### Same as upstream, or not")
    page = _table_after(read("studies/baidu_reproducibility/README.md"), "## Same as upstream, or not")
    assert docs[0].startswith("| what | upstream | ours | same? | why it differs | measured effect |")
    assert len(docs) > 10 and page == docs
