"""Archive: stage results in S3 (or any S3-compatible store), keyed by run, never overwritten.

Key layout (one stage of one run; every name is a single path segment):

    <prefix>/<stack>/<profile>/<run-id>/<stage>/files/<relative path>   each file of the result dir
    <prefix>/<stack>/<profile>/<run-id>/<stage>/manifest.json            the RunRecord, written last

- prefix: `cosmos3-nano-reasoner` unless set (may itself contain `/`);
- stack: the Pulumi stack's short name (`round-robin`, `session-affinity`, `dev`, ...);
- profile: the routing profile of the stack outputs the stage ran against;
- run id: sortable, `YYYYMMDDTHHMMSSZ-<short commit>` unless given, so one pipeline run can store
  its smoke and its perf stage under the same id;
- stage: `smoke`, `perf` or `report`.

`manifest.json` (a `RunRecord`) names the stack, profile, run id, stage, UTC time, git commit, the
stack outputs the stage ran against and every stored file with its size and sha256. It is written
after all files, and only manifests make runs: a run without one is incomplete, never listed.
Listing skips, with a warning on stderr naming the key and why, any object at a manifest's key
that is not that run's manifest (not JSON, not a RunRecord, another run's record); `pull --run-id`
of such a run fails with the same reason. Downloading writes the files back under the names they
were pushed with, checked against the manifest's sizes and digests first.

Never an overwrite: every object is written with `If-None-Match: *` (an S3 conditional write), so
the store itself refuses to replace a key (412) and two concurrent pushes cannot both win; a
refusal is an `ArchiveConflictError` naming the key. A run whose manifest exists is refused
before anything is uploaded. (This needs a store that honours conditional writes: AWS S3, MinIO
and SeaweedFS do.) Each file is uploaded with a sha256 checksum the store verifies and keeps.

Interrupted pushes (files stored, no manifest) are finished or removed, never overwritten:
- `archive push --resume` with the same stack, outputs, stage, run id and directory keeps every
  stored file whose size and sha256 match the local file (the store's checksum, or the bytes
  when it kept none), uploads the missing ones, then the manifest (whose time is that of the
  resume). A stored file that differs, or that the directory no longer has, is a conflict found
  before anything is uploaded. Resuming a run already complete with the same files does nothing.
- `archive incomplete` lists the runs that have objects but no manifest; `archive clean` deletes
  the objects of one of them. It refuses a run whose manifest exists (complete runs are never
  deleted by it, even with a corrupt manifest) and, unless `--older-than 0`, one written to in
  the last 10 minutes, whose push may still be running.

Where the store is and who you are: the bucket and prefix are arguments. The endpoint is the
argument or, as boto3 does on its own, `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` / the profile's
config; the region and the credentials come only from the standard AWS chain (environment, shared
config and credentials files, `AWS_PROFILE`, instance roles). No credential is ever a parameter
here, and none appears in a message.

Secrets: the manifest holds the stack outputs (secret-free by contract) and nothing from the
environment. Before uploading, every file is scanned for obvious secrets (private keys, AWS access
key ids, NGC API keys, the value of any secret-named environment variable); a hit refuses the whole
run, naming the file and the kind of secret, never the value.

Modules: records (RunRecord, the errors, and the location and keys of a run), stores (the S3
bucket, a local directory in its place, the protocol both keep and the choice between them), push
(the secret scan of local files, then the push and its resume), runs (listing, latest, fetch,
download, incomplete runs and clean), report_inputs (a report from archived runs), cli
(`python -m stages archive`, its one entry point).
"""

from stages.archive.push import PushOutcome, archive_plan, archive_run, find_secret, resume_run
from stages.archive.records import (
    DEFAULT_PREFIX,
    ArchiveConflictError,
    ArchivedFile,
    ArchiveError,
    ArchiveLocation,
    CorruptManifestError,
    RunNotFoundError,
    RunPlace,
    RunRecord,
    Stage,
    current_commit,
    new_run_id,
)
from stages.archive.runs import (
    IncompleteRun,
    clean_incomplete_run,
    download_record,
    download_run,
    fetch_record,
    latest_run,
    list_incomplete_runs,
    list_runs,
)

__all__ = [
    "DEFAULT_PREFIX",
    "ArchiveConflictError",
    "ArchiveError",
    "ArchiveLocation",
    "ArchivedFile",
    "CorruptManifestError",
    "IncompleteRun",
    "PushOutcome",
    "RunNotFoundError",
    "RunPlace",
    "RunRecord",
    "Stage",
    "archive_plan",
    "archive_run",
    "clean_incomplete_run",
    "current_commit",
    "download_record",
    "download_run",
    "fetch_record",
    "find_secret",
    "latest_run",
    "list_incomplete_runs",
    "list_runs",
    "new_run_id",
    "resume_run",
]
