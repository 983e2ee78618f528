"""Can a profile stack be previewed on this shared layer stack? For CI, before its preview.

    pulumi stack output --json --stack <org>/cosmos3-nano-reasoner/shared > shared.json
    python -m tools.layer_ready shared.json

Exit 0 when the outputs carry every layer key a graph is built on (`components.outputs`); exit 1
with the reason otherwise, e.g. on a repository's first pull request, before `up.yml` has ever
deployed the shared stack. A layer whose download has not completed, or that an earlier version of
the program deployed, still passes with a note: the profile's preview warns about it and shows
its diff, and its `up` refuses it (components/outputs.py `ordering_problems`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.input_files import InputFileError, parsed_json, read_text
from common.parsers import CommandParser
from components.outputs import CACHE_READY_KEY, CREDENTIALS_DIGEST_KEY, missing_layer_outputs


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m tools.layer_ready", description=__doc__.split("\n")[0])
    parser.add_argument("outputs", metavar="SHARED_OUTPUTS_JSON", help="the shared stack's outputs")
    path = parser.parse_args(argv).outputs  # a usage error exits 2, `--help` 0
    try:
        text = read_text(Path(path), "outputs file") or "{}"  # no stack: no outputs
        outputs = parsed_json(text, path, "outputs file")
    except InputFileError as error:
        print(f"the shared stack's outputs cannot be read: {error}")
        return 1
    if not isinstance(outputs, dict):
        print(f"the shared stack's outputs in {path} are not a JSON object")
        return 1
    missing = missing_layer_outputs(outputs)
    if missing:
        print(f"the shared stack has no output {', '.join(missing)}: it was never deployed")
        return 1
    notes = []
    if outputs[CACHE_READY_KEY] is not True:
        notes.append(f"its model download has not completed ({CACHE_READY_KEY} is not true)")
    if not outputs.get(CREDENTIALS_DIGEST_KEY):
        notes.append(f"it has no {CREDENTIALS_DIGEST_KEY} yet (an earlier version deployed it)")
    if notes:
        print(
            f"the shared stack is deployed, but {'; '.join(notes)}: a profile's preview warns, "
            "and its up refuses until the shared stack is updated"
        )
    else:
        print("the shared stack is deployed and its model cache is ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
