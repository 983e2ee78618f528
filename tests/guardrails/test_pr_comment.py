"""The pull request's preview comment, made from the engine's real `pulumi preview --diff` output.

preview.yml's comment is posted by pulumi/actions v7.0.0 (the SHA pinned in pulumi-stack.yml),
not by us; it cannot run here. Its body is built by `handlePullRequestMessage` (src/libs/pr.ts at
that commit): ANSI codes stripped, the output cut to 64,000 characters, and put raw, unescaped,
between `<pre>` and `</pre>` in a `dedent` template (dedent 0.7: every line that starts with a
space loses the smallest such indentation, and a literal backslash-n becomes a line break).
`pr_comment_body` repeats that; the action's own test fixes the body of a one-line output, and
the port is held to it. Then the engine's real output (the golden of a TTL change, written by
`tools.engine_goldens` from `pulumi preview --diff` on the real tier) goes through it: a reviewer
must see every changed line, nothing GitHub would take for an HTML tag and hide, and no cut.
"""

from __future__ import annotations

import re

from common import REPO_ROOT
from tests.guardrails.support import steps

ACTION_SHA = "8e5e406f4007fca908480587cb9893c07090f58d"  # pulumi/actions v7.0.0
MAX_CHARACTER_COMMENT = 64_000  # pr.ts: GitHub's 65,535 less room for the template
ANSI = re.compile(r"\x1B(?:[@-Z\\\-_]|\[[0-?]*[ -/]*[@-~])")  # utils.ts, stripAnsiControlCodes
HTML_TAG = re.compile(r"<[A-Za-z/!?]")
"""What GitHub's sanitizer reads as the start of a tag inside `<pre>`: hidden from the reviewer."""
GOLDEN = REPO_ROOT / "manifests" / "engine" / "session-affinity.preview-diff-ttl-120.txt"
PROVIDER_ID = "5c3c1b0e-6a8e-4c47-9a44-3f5a7e2e9d10"
"""A provider id as the engine prints it (the golden writes `<id>` for it, a placeholder)."""


def dedent_0_7(text: str) -> str:
    """dedent 0.7.0 over an already interpolated template."""
    lines = text.split("\n")
    indents = [len(m.group(1)) for line in lines if (m := re.match(r"^(\s+)\S+", line))]
    if indents:
        least = min(indents)
        lines = [line[least:] if line.startswith(" ") else line for line in lines]
    return "\n".join(lines).strip().replace("\\n", "\n")


def pr_comment_body(project: str, stack: str, output: str) -> tuple[str, bool]:
    """The comment pulumi/actions v7.0.0 posts for `preview` (no View Live link: a file or
    self-managed backend prints none), and whether the output was cut."""
    output = ANSI.sub("", output)
    trimmed = len(output) > MAX_CHARACTER_COMMENT
    message = output[:MAX_CHARACTER_COMMENT]
    warning = ":warning: **Warn**: The output was too long and trimmed." if trimmed else ""
    template = (
        f"\n    #### :tropical_drink: `preview` on {project}/{stack}\n\n    <details>\n"
        f"    <summary>Pulumi report</summary>\n    \n    \n    <pre>\n    {message}\n"
        f"    </pre>\n    {warning}\n    </details>\n  "
    )
    return dedent_0_7(template), trimmed


def shown_output(body: str) -> str:
    """What the reviewer sees: the text between `<pre>` and `</pre>`, each on its own line."""
    return re.split(r"\n *</pre>", body.split("<pre>\n", 1)[1])[0]


def test_the_port_builds_the_body_the_actions_own_test_expects() -> None:
    """pulumi/actions v7.0.0, src/libs/__tests__/pr.test.ts: 'should add pull request message'
    and 'should convert ansi control character to plain text'."""
    expected = (
        "#### :tropical_drink: `preview` on myFirstProject/staging\n\n<details>\n"
        "<summary>Pulumi report</summary>\n\n\n<pre>\n{}\n</pre>\n\n</details>"
    )
    for output, shown in [("test", "test"), ("\x1b[30mblack\x1b[37mwhite", "blackwhite")]:
        assert pr_comment_body("myFirstProject", "staging", output) == (
            expected.format(shown),
            False,
        )


def test_the_workflow_comments_with_the_ported_version() -> None:
    (step,) = [
        s for s in steps("pulumi-stack.yml", "pulumi") if "comment-on-pr" in s.get("with", {})
    ]
    assert step["uses"] == f"pulumi/actions@{ACTION_SHA}"
    assert step["with"]["diff"] is True


def test_the_engines_real_preview_diff_reaches_the_reviewer_whole() -> None:
    output = GOLDEN.read_text().replace("<id>", PROVIDER_ID)
    body, trimmed = pr_comment_body("cosmos3-nano-reasoner", "session-affinity", output)

    assert not trimmed and len(body) < 65_535
    shown = shown_output(body)
    assert HTML_TAG.findall(shown) == [], "GitHub would hide these as tags"
    assert [line.strip() for line in shown.splitlines()] == [
        line.strip() for line in output.strip().splitlines()
    ]
    assert '~ [5]: "300" => "120"' in shown
    assert "~ sessionAffinityTtlSeconds: 300 => 120" in shown


def test_what_would_not_reach_the_reviewer_is_caught() -> None:
    """The checks above can fail: an unknown value as the engine prints it (`output<string>`)
    would be a hidden tag, and an output past the action's limit is cut."""
    hidden = pr_comment_body("p", "s", "  + image: output<string>\n  ~ a: 1 => 2")[0]
    assert HTML_TAG.findall(shown_output(hidden)) == ["<s"]
    long_output = "  ~ line\n" * 10_000
    assert pr_comment_body("p", "s", long_output)[1] is True
