"""A frontend's command line as a deployed graph gives it, and the one thing the lab sets over it:
where it listens (127.0.0.1 and a free port)."""

from __future__ import annotations

from dataclasses import dataclass

from common.ports import LOOPBACK


@dataclass(frozen=True)
class FrontendCommand:
    """A frontend's command line as a DynamoGraphDeployment's frontend container has it: its
    command and args as one argv, and its environment. The first word is looked up on a PATH that
    starts with the lab's Dynamo venv (as the frontend image's PATH finds its `python3`)."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


LISTEN_OPTIONS = {"--http-host": LOOPBACK, "--http-port": None}


def listen_on(argv: list[str], port: int) -> list[str]:
    """`argv` with the value of any --http-host or --http-port it gives replaced by 127.0.0.1 and
    `port` (the environment sets them otherwise): where the lab's frontend listens, and only that."""
    values = {option: value or str(port) for option, value in LISTEN_OPTIONS.items()}
    result: list[str] = []
    replace_next: str | None = None
    for word in argv:
        if replace_next is not None:
            result.append(values[replace_next])
            replace_next = None
            continue
        option, equals, _ = word.partition("=")
        if option in values and equals:
            result.append(f"{option}={values[option]}")
            continue
        if word in values:
            replace_next = word
        result.append(word)
    return result
