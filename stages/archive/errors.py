"""The archive's errors: each message says where (bucket, key, endpoint) and how to fix it."""

from __future__ import annotations

from pydantic import ValidationError

from stages.errors import StageFailed


class ArchiveError(StageFailed):
    """The archive cannot do what was asked; the message says where and how to fix it (a stage
    failure to `python -m stages`: exit status 1)."""


class ArchiveConflictError(ArchiveError):
    """A key that would be written already exists: the archive never overwrites."""


class RunNotFoundError(ArchiveError):
    """No archived run matches the request."""


class CorruptManifestError(ArchiveError):
    """An object at a manifest's key is not the manifest of the run its key names."""


def validation_summary(error: ValidationError, limit: int = 3) -> str:
    """`field: problem; ...` on one line, without the offending values (they may be anything)."""
    problems = [
        f"{'.'.join(str(part) for part in problem['loc']) or 'value'}: {problem['msg']}"
        for problem in error.errors()
    ]
    more = f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more
