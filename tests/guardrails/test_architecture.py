"""The house's rules: imports point down only, no import cycle, no module too big to hold in mind.

The layer contracts live in `.importlinter` (import-linter), which `make check` runs; here, that a
back-arrow breaks one.
Imports inside functions count like any other: grimp reads every import statement of a module.
A module outside tests/ passes 300 formatted lines only when a paragraph of its docstring starts
with `Over 300 lines:` and says, in a few words at least, why it is one cohesive thing.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from common import REPO_ROOT

PACKAGES = ("common", "components", "stages", "lab", "testenv", "tools", "policy")
MAX_MODULE_LINES = 300
REASON_TO_BE_LONG = "Over 300 lines:"
"""How a module's docstring starts the sentence that says why it is one thing and longer."""
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.skip(f"import-linter is not installed at {LINT_IMPORTS} (the dev lock has it)")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_back_arrow_breaks_a_contract(tmp_path: Path) -> None:
    for name in (*PACKAGES, ".importlinter"):
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("venv"))
        else:
            shutil.copy(source, tmp_path / name)
    with (tmp_path / "stages" / "core" / "workload.py").open("a") as module:
        module.write("\nfrom lab import standin  # a back-arrow: the stages may not use the lab\n")

    result = lint_imports(tmp_path)

    assert result.returncode == 1
    assert "stages.core.workload -> lab.standin" in result.stdout


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """The import cycles: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(group)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    """Every import of the house, and which third-party packages each module imports."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.syspath_prepend(str(REPO_ROOT))
        return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)


def test_no_import_cycle_anywhere(import_graph: grimp.ImportGraph) -> None:
    assert strongly_connected(import_graph) == []


KUBERNETES_CLIENT_USERS = {
    "components.kubeconfig",  # the one client builder
    "lab.controller",
    "lab.frontend_service",
    "stages.cluster.kubernetes_api",
    "tools.validate",
}
"""The modules that import the official Kubernetes client (kopf keeps such a list): a new one
speaks to the API server beside these adapters; it goes through them, or joins this list."""


def test_the_kubernetes_client_is_imported_by_its_adapters_only(
    import_graph: grimp.ImportGraph,
) -> None:
    assert import_graph.find_modules_that_directly_import("kubernetes") == KUBERNETES_CLIENT_USERS


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in (("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")):
        graph.add_import(importer=importer, imported=imported)

    assert strongly_connected(graph) == [{"a.x", "a.y", "a.z"}]


def reason_to_be_long(path: Path) -> str:
    """The reason a module's docstring gives for passing the limit: a paragraph of it that starts
    with `Over 300 lines:`, without those words; empty if it gives none."""
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    for paragraph in docstring.split("\n\n"):
        text = " ".join(paragraph.split())
        if text.startswith(REASON_TO_BE_LONG):
            return text.removeprefix(REASON_TO_BE_LONG).strip()
    return ""


def too_long(root: Path, packages: tuple[str, ...]) -> dict[str, int]:
    """Modules over the limit whose docstring does not say why they are one cohesive thing (a
    reason of a few words at least). Formatted lines: `ruff format --check` holds every module to
    the formatter's layout, so a line count cannot be bought by packing lines."""
    return {
        str(path.relative_to(root)): lines
        for package in packages
        for path in (root / package).rglob("*.py")
        if "venv" not in path.parts
        and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
        and len(reason_to_be_long(path).split()) < 5
    }


def test_no_module_over_300_lines_outside_tests_without_a_reason() -> None:
    assert too_long(REPO_ROOT, PACKAGES) == {}


def test_a_long_module_without_a_reason_fails(tmp_path: Path) -> None:
    body = "\n".join(f"x{n} = {n}" for n in range(MAX_MODULE_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text('"""Short."""\n')
    (tmp_path / "pkg" / "silent.py").write_text(f'"""A long module."""\n{body}\n')
    (tmp_path / "pkg" / "vague.py").write_text(
        f'"""A long module.\n\n{REASON_TO_BE_LONG} big."""\n{body}\n'
    )
    reason = f"{REASON_TO_BE_LONG} one table of options,\nchecked the same way."
    (tmp_path / "pkg" / "reasoned.py").write_text(f'"""A long module.\n\n{reason}\n"""\n{body}\n')

    assert too_long(tmp_path, ("pkg",)) == {"pkg/silent.py": 301, "pkg/vague.py": 303}
    assert (
        reason_to_be_long(tmp_path / "pkg" / "reasoned.py")
        == "one table of options, checked the same way."
    )


def not_to_import(module: str, relative: bool = False) -> bool:
    """A conftest anywhere, or a test module of tests/ (`tests.<...>.test_*`, or relative)."""
    parts = module.split(".")
    in_tests = relative or parts[0] == "tests"
    return parts[-1] == "conftest" or (in_tests and parts[-1].startswith("test_"))


def beside(path: Path, module: str) -> bool:
    """A bare name of a module in the importer's own folder: pytest puts a folder without an
    `__init__.py` (tests/real) on sys.path, so `from test_x import ...` works there."""
    return "." not in module and (path.parent / f"{module}.py").exists()


def imports_of_conftests_or_test_modules(root: Path) -> list[str]:
    """Modules under tests/ that import from a `conftest.py` or from a test module. A conftest
    holds fixtures, which pytest finds by name; a test module holds tests, and a `test_*` name
    imported from it is collected twice. What test modules share lives in a support module
    beside them (`support.py`, or another name not starting with `test_`)."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                relative = node.level > 0 or beside(path, node.module or "")
                if not_to_import(node.module or "", relative):
                    found.append(f"{where}: from {module} import ...")
                found += [
                    f"{where}: from {module} import {alias.name}"
                    for alias in node.names
                    if (node.level > 0 or module.split(".")[0] == "tests")
                    and not_to_import(alias.name, relative=True)
                ]
            elif isinstance(node, ast.Import):
                found += [
                    f"{where}: import {alias.name}"
                    for alias in node.names
                    if not_to_import(alias.name, beside(path, alias.name))
                ]
    return found


def test_no_module_imports_a_conftest_or_a_test_module() -> None:
    assert imports_of_conftests_or_test_modules(REPO_ROOT) == [], (
        "move what test modules share into a support module beside them (tests/<...>/support.py)"
    )


def test_an_import_of_a_conftest_or_a_test_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests" / "x").mkdir(parents=True)
    (tmp_path / "tests" / "test_a.py").write_text("from tests.conftest import NGC_KEY\n")
    (tmp_path / "tests" / "test_b.py").write_text("from tests.x.test_y import steps\n")
    (tmp_path / "tests" / "x" / "test_c.py").write_text(
        "import tests.x.test_y\nimport tests.x.test_z as z, tests.x.support\n"
        "from tests.x import support, test_y\nfrom .test_z import steps\n"
    )
    (tmp_path / "tests" / "x" / "test_d.py").write_text(
        "from tests.x.support import steps\nfrom tests.x import support\nimport tests.support\n"
        "from tests.x.testing import tools\nfrom . import support as s\nimport test_utils\n"
    )
    (tmp_path / "tests" / "y").mkdir()  # a folder pytest puts on sys.path (no __init__.py)
    (tmp_path / "tests" / "y" / "test_f.py").write_text("")
    (tmp_path / "tests" / "y" / "test_e.py").write_text(
        "from test_f import steps\nimport test_f\nimport test_absent\nfrom myconftest import x\n"
    )
    assert imports_of_conftests_or_test_modules(tmp_path) == [
        "tests/test_a.py: from tests.conftest import ...",
        "tests/test_b.py: from tests.x.test_y import ...",
        "tests/x/test_c.py: import tests.x.test_y",
        "tests/x/test_c.py: import tests.x.test_z",
        "tests/x/test_c.py: from tests.x import test_y",
        "tests/x/test_c.py: from .test_z import ...",
        "tests/y/test_e.py: from test_f import ...",
        "tests/y/test_e.py: import test_f",
    ]


ROOT_FROM_FILE = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[\d+\]")
"""How a module would find the clone's root by itself, beside `common.REPO_ROOT`."""
ROOT_DEFINED = {"common/__init__.py", "policy/__main__.py", "tests/guardrails/test_architecture.py"}
"""Where that is right: REPO_ROOT itself, and the policy pack's entry point, which puts the root on
sys.path before `common` can be imported (and this module, whose examples spell it)."""


def roots_from_file(root: Path) -> list[str]:
    """Modules that compute the repository root themselves: it has one name, REPO_ROOT."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith((".", "build/")) or "/venv/" in relative or relative in ROOT_DEFINED:
            continue
        if ROOT_FROM_FILE.search(path.read_text()):
            found.append(relative)
    return found


def test_the_repository_root_has_one_name() -> None:
    assert roots_from_file(REPO_ROOT) == []


def test_a_root_computed_again_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("REPO = Path(__file__).resolve().parents[1]\n")
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "__init__.py").write_text(
        "REPO_ROOT = Path(__file__).resolve().parents[1]\n"
    )
    assert roots_from_file(tmp_path) == ["tests/test_x.py"]
