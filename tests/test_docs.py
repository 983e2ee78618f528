"""The docs hold together: links resolve, code points at pages that exist, the README stays short.

- every relative Markdown link `[text](path)` or `[text](path#anchor)` (and every reference-style
  link definition) in the project's Markdown files names an existing file inside the project, and
  an anchor into a Markdown file names one of its headings, slugged as GitHub does;
- every path under `docs/` that a Python, shell, workflow or build file mentions exists (with its
  anchor, if it gives one);
- README.md is under 250 lines; every docs page is linked from the README, every decision record
  from the decisions index;
- the exit-status table in the stages page is the one `stages.errors` defines.

The project's files are what git would commit: tracked, plus untracked files that are not ignored.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from common import REPO_ROOT as ROOT
from stages.errors import EXIT_STATUSES

THIS_FILE = Path(__file__).resolve()
README_MAX_LINES = 250
MARKDOWN = ("*.md",)
CODE = ("*.py", "*.sh", "*.yml", "*.yaml", "*.toml", "Makefile", ".importlinter", ".ci/run")

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`\n]*`+")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DOCS_POINTER = re.compile(r"(?<![\w./-])docs/[\w./-]*\.md(?:#[\w-]+)?")


def project_files(root: Path, patterns: Iterable[str]) -> list[Path]:
    """The files git would commit that match `patterns` (git pathspecs: `*` crosses folders)."""
    try:
        listed = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "--cached",
                "--others",
                "--exclude-standard",
                "-z",
                "--",
                *patterns,
            ],
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.fail(f"git cannot list the files of {root}")
    return sorted({root / name for name in listed.split("\0") if name and (root / name).is_file()})


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Numbered lines outside fenced code blocks, with inline code spans blanked out."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = _FENCE.match(line)
        if opening and (fence is None or opening.group(1) == fence):
            fence = None if fence else opening.group(1)
            continue
        if fence is None:
            yield number, _CODE_SPAN.sub("code", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lowercased, punctuation but `-` and `_` dropped,
    spaces as `-`."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; repeated headings get `-1`, `-2`, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    fence: str | None = None
    for line in path.read_text().splitlines():
        opening = _FENCE.match(line)
        if opening and (fence is None or opening.group(1) == fence):
            fence = None if fence else opening.group(1)
            continue
        heading = _HEADING.match(line) if fence is None else None
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_targets(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every inline link, image and reference definition outside code."""
    for number, line in prose_lines(text):
        for match in _LINK.finditer(line):
            yield number, match.group(1)
        definition = _DEFINITION.match(line)
        if definition:
            yield number, definition.group(1)


def check_target(root: Path, source: Path, target: str) -> str | None:
    """Why `target`, as written in `source`, does not resolve; None when it does."""
    if _SCHEME.match(target):
        return None  # a URL, not a file of the project
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part)
    if not path_part:
        resolved = source
    elif path_part.startswith("/"):
        resolved = (root / path_part.lstrip("/")).resolve()
    else:
        resolved = (source.parent / path_part).resolve()
    if not resolved.is_relative_to(root.resolve()):
        return f"{target}: outside the project"
    if not resolved.exists():
        return f"{target}: no such file"
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"{target}: no heading with the anchor #{anchor} in {resolved.relative_to(root)}"
    return None


def broken_links(root: Path, files: Iterable[Path]) -> list[str]:
    problems = []
    for source in files:
        for number, target in link_targets(source.read_text()):
            reason = check_target(root, source, target)
            if reason:
                problems.append(f"{source.relative_to(root)}:{number}: {reason}")
    return problems


def broken_docs_pointers(root: Path, files: Iterable[Path]) -> list[str]:
    problems = []
    for source in files:
        for number, line in enumerate(source.read_text(errors="replace").splitlines(), start=1):
            for match in _DOCS_POINTER.finditer(line):
                reason = check_target(root, root / "README.md", match.group(0))
                if reason:
                    problems.append(f"{source.relative_to(root)}:{number}: {reason}")
    return problems


# --- the project --------------------------------------------------------------------------------


def test_every_markdown_link_resolves() -> None:
    files = project_files(ROOT, MARKDOWN)
    assert ROOT / "README.md" in files and ROOT / "docs" / "stages.md" in files
    assert broken_links(ROOT, files) == []


def test_every_docs_path_named_in_code_exists() -> None:
    files = [f for f in project_files(ROOT, CODE) if f != THIS_FILE]  # its samples are broken
    assert ROOT / "stages" / "incluster" / "perf_pod.py" in files
    assert broken_docs_pointers(ROOT, files) == []


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_docs_page_is_linked_from_the_readme_and_every_record_from_the_index() -> None:
    def linked(page: Path) -> set[Path]:
        return {
            (page.parent / unquote(target.partition("#")[0])).resolve()
            for _, target in link_targets(page.read_text())
            if not _SCHEME.match(target) and target.partition("#")[0]
        }

    docs = ROOT / "docs"
    assert set(docs.glob("*.md")) - linked(ROOT / "README.md") == set()
    records = docs / "decisions"
    assert set(records.glob("0*.md")) - linked(records / "README.md") == set()


def test_the_exit_status_table_is_the_codes() -> None:
    text = (ROOT / "docs" / "stages.md").read_text()
    section = text.split("\n## Exit statuses\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section, flags=re.MULTILINE)
    assert [(int(code), meaning) for code, meaning in rows] == list(EXIT_STATUSES)


# --- the checker itself -------------------------------------------------------------------------


def test_slugs_follow_githubs_rules() -> None:
    assert (
        slug("What `pulumi up` creates, and how it waits")
        == "what-pulumi-up-creates-and-how-it-waits"
    )
    assert slug("0001: A shared layer_stack (v2)") == "0001-a-shared-layer_stack-v2"
    assert slug("See [the lab](lab.md) - now") == "see-the-lab---now"


SAMPLE_README = """\
# Title
[ok](docs/page.md) [ok](docs/page.md#same-1) [ok](#title) [ok](https://x.y/z)
[missing](docs/gone.md) [bad anchor](docs/page.md#nowhere) [up](../outside.md)
![image](docs/missing.png)
`[in code](docs/gone.md)`
```
[in a fence](docs/gone.md)
```
[ref]: docs/also-gone.md
"""


def test_the_checker_finds_every_kind_of_broken_reference(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## Same\n\n## Same\n")
    (tmp_path / "README.md").write_text(SAMPLE_README)
    (tmp_path / "tool.py").write_text('HINT = "see docs/gone.md"\nOK = "see docs/page.md#page"\n')

    links = broken_links(tmp_path, project_files(tmp_path, MARKDOWN))
    pointers = broken_docs_pointers(tmp_path, project_files(tmp_path, CODE))

    assert links == [
        "README.md:3: docs/gone.md: no such file",
        "README.md:3: docs/page.md#nowhere: no heading with the anchor #nowhere in docs/page.md",
        "README.md:3: ../outside.md: outside the project",
        "README.md:4: docs/missing.png: no such file",
        "README.md:9: docs/also-gone.md: no such file",
    ]
    assert pointers == ["tool.py:1: docs/gone.md: no such file"]
