"""The size of the house: each room of Python outside tests/ holds a budget of lines.

A change that grows a room past its budget fails here until the same change raises the budget:
growth is then a line of the pull request's diff, where a reviewer weighs what the new lines buy
(docs/contributing.md, "The size of the house"). A budget is lowered whenever a room shrinks, so
the next growth is seen from there. Formatted lines, as `wc -l` counts them: `ruff format --check`
holds every module to the formatter's layout, so a budget cannot be met by packing lines.
"""

from __future__ import annotations

from pathlib import Path

from common import REPO_ROOT

ROOM_BUDGETS = {
    "__main__.py": 50,
    "components": 5_896,
    "stages": 9_212,
    "policy": 506,
    "common": 1_811,
    "lab": 4_431,
    "tools": 1_630,
    "testenv": 2_554,
}
"""Lines of Python per room (a package, or a module at the root), measured 2026-12-06; since
then stages +11 (one encoding of the perf plan, at gzip level 6), and lab +19 (2026-12-07:
`lab calibrate` tells a check the host reordered from a row that cannot be explained), stages
+146 and lab +1 (2026-12-07: the A/B's resume, take-down and verdict mended after a review found
them wrong), testenv -1, components +84 (2026-12-07: refusals a review found missing: the
project's own Secret named as an existing one, keys marked secret and written plain, a frontend
image without a version tag; an `up` that cannot read an autoscaled graph), stages +30 (the
archive: a name that is not UTF-8, a manifest dated out of range, --older-than 0, --region, an
AWS config that does not parse; +4, a key no push writes is no run; +6, a manifest no reader
would take refused before any upload; +8, the directory store's writes in progress out of its
keys, a link at a manifest's key skipped; +1, a resume reads only its own run's keys), common +10 (the secret
scan reads a text file with a stray byte line by line), components +21 and tools +2 (a profile
stack's workers select the NIM profile the layer's download selected), components +46 (one class
registers every object from its manifest, in place of pulumi-kubernetes's typed classes:
decision 0016), components +35 and tools +1 (the layer's download exports the
NIM selection entries of workerExtraEnv, which a profile stack's must match), stages +12 and
common +19 (`archive pull` claims its --dest; `archive push` refuses a folder a stage still
writes), stages +78 and common +14 (`archive clean` leaves a mark at the run's manifest key,
so no resume completes a run over deleted files, and the A/B refuses such a run id before
deploying; a command that failed before writing leaves its folder unmarked), components +6 (an
extra env entry with the recipe's own value selects nothing new), stages +10 and common +5 (a
second review: a manifest naming a claim's file, a push below a locked folder, the A/B's refusal
before any push is finished, a marker over a folder of sub-folders), stages +1 (the mark read
once), stages +17 (a `file://` store names what is no file at a manifest's key; `archive pull`
into a folder holding files exits 2 naming --dest, as the claim does), stages +15 and lab +18
(a resumed A/B runs at the time scale its archived profile ran at), stages +54 (a review of the
cluster path: a Job created as Ctrl-C lands is deleted, a poll the API server does not answer is
asked again, a timed-out sweep keeps its log and finished levels, a pod program waits out an
answer cut short), common +7 and lab +1 (a lab graph's run folder is checked from the folder
the command holds: a link on the way is refused, never resolved), tools +29 and common +4 (a review of the user's tools: `golden --check` reads no link
and prints masked, `validate` names credentials its cluster refuses, `config_reference` a
missing marker, and a render that failed halfway can write its folder again), stages +1 (exit
status 4 also names a previous run's objects that outlive their deletion), lab +7 (a review of
the stand-in operator: a graph made again under its name is published after the old one stops,
a restart the API server failed is tried again, a start on a full disk fails the graph, the
pass-through's exit takes the graph out of Ready, an abbreviated --http-host is loopback too),
testenv +43 (a Ctrl-C as a component starts comes once it is recorded for `down`; a CRD file
with the DGD's after other CRDs is read, a misshapen one named in a line), components +13 (a
review of the program: a layer stack that deploys a graph is refused, a claim name is a DNS
subdomain, the port-forward command quotes its context, a number where a string goes says how
to store a string, a key marked secret never shows its value in a refusal), lab +10 (a deployed
graph's env never moves a listener off loopback). The issue that set the house's
size asked for 17k lines outside tests/; docs/contributing.md says why the rooms hold more and
where they went."""


def room_lines(root: Path, room: str) -> int:
    """The lines of the Python modules of a room (a package below `root`, or one module)."""
    place = root / room
    modules = [place] if place.suffix == ".py" else place.rglob("*.py")
    return sum(len(path.read_text().splitlines()) for path in modules if "venv" not in path.parts)


def over_budget(root: Path, budgets: dict[str, int]) -> dict[str, str]:
    """Each room past its budget, with what to do."""
    return {
        room: (
            f"{lines:,} lines, over its budget of {budget:,}: simplify, or raise "
            f"ROOM_BUDGETS[{room!r}] in tests/guardrails/test_code_size.py in the same change "
            "and say in the pull request what the lines buy"
        )
        for room, budget in budgets.items()
        if (lines := room_lines(root, room)) > budget
    }


def test_every_room_holds_its_budget() -> None:
    assert over_budget(REPO_ROOT, ROOM_BUDGETS) == {}


def test_every_room_of_python_has_a_budget() -> None:
    rooms = {
        path.name
        for path in REPO_ROOT.iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").is_file()) and path.name != "tests"
    }
    assert rooms == set(ROOM_BUDGETS)


def test_a_room_past_its_budget_fails(tmp_path: Path) -> None:
    (tmp_path / "room" / "inner").mkdir(parents=True)
    (tmp_path / "room" / "a.py").write_text("x = 1\ny = 2\n")
    (tmp_path / "room" / "inner" / "b.py").write_text("z = 3\n")
    (tmp_path / "main.py").write_text("print()\n")

    assert room_lines(tmp_path, "room") == 3
    assert over_budget(tmp_path, {"room": 3, "main.py": 1}) == {}
    problems = over_budget(tmp_path, {"room": 2, "main.py": 1})
    assert list(problems) == ["room"]
    assert "3 lines, over its budget of 2" in problems["room"]
    assert "ROOM_BUDGETS['room']" in problems["room"]
