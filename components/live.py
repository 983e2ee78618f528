"""What the cluster holds now, read-only: the few facts the provider's diff cannot see.

The model download (is the Job running, failed, complete), the waits (`components.readiness`) and
drift (`components.drift`: which fields kubectl owns) read the live cluster, through the
kubeconfig and context the provider uses. A Secret's data is never read: objects whose content is
not needed are fetched as metadata only. A read that cannot be made raises `LiveReadError` with
what the API server said, never the request's credentials; callers decide what unknown means.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from components.kubeconfig import KubeconfigError, api_client, first_line

Manifest = dict[str, Any]
REQUEST_TIMEOUT_SECONDS = 15
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


@dataclass(frozen=True)
class ObjectRef:
    """One object of the API: `api_version` as in a manifest (`v1`, `batch/v1`, ...)."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> ObjectRef:
        metadata = manifest["metadata"]
        return cls(
            manifest["apiVersion"],
            manifest["kind"],
            metadata["name"],
            metadata.get("namespace", ""),
        )

    def collection_path(self) -> str:
        """The API path of this kind's collection in this object's namespace."""
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        cluster_wide = self.kind in ("Namespace", "CustomResourceDefinition")
        where = "" if cluster_wide else f"/namespaces/{self.namespace}"
        return f"{root}{where}/{self.kind.lower()}s"  # every plural here is kind + s

    def path(self) -> str:
        return f"{self.collection_path()}/{self.name}"

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class LiveReadError(Exception):
    """The cluster could not be read; the message says what the API server or the client said."""


class ClusterView(Protocol):
    """Reads of the live cluster. `get` and `metadata` answer None for an object that is not
    there; `list` answers the objects of a kind in a namespace, optionally by label or field
    selector. Each raises `LiveReadError` when it cannot tell."""

    def get(self, ref: ObjectRef) -> Manifest | None: ...

    def metadata(self, ref: ObjectRef) -> Manifest | None: ...

    def list(self, ref: ObjectRef, selector: Mapping[str, str] | None = None) -> list[Manifest]: ...


T = TypeVar("T")


class Unknown:
    """What a read that could not be made answers (`Live.attempt`)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()


@dataclass
class Live:
    """A view and what to say, once per program run, when it cannot be read: a preview without
    cluster credentials still runs, and says what it could not check."""

    view: ClusterView
    warn: Callable[[str], None]
    _said: bool = field(default=False, repr=False)

    def attempt(self, read: Callable[[ClusterView], T]) -> T | Unknown:
        try:
            return read(self.view)
        except LiveReadError as error:
            if not self._said:
                self._said = True
                self.warn(
                    f"cannot read the cluster ({error}): this run does not know whether the model "
                    "download runs or failed, nor which fields kubectl owns on what it updates"
                )
            return UNKNOWN


CRD_API_VERSION = "apiextensions.k8s.io/v1"


def missing_crds(live: Live, crds: Iterable[str]) -> list[str]:
    """The CRDs (`<plural>.<group>`) of `crds` the cluster does not have, for a refusal before
    anything is created; a cluster that cannot be read is let through (`Live.attempt` says so)."""

    def absent(crd: str) -> bool:
        ref = ObjectRef(CRD_API_VERSION, "CustomResourceDefinition", crd)
        return live.attempt(lambda view: view.metadata(ref)) is None

    return [crd for crd in crds if absent(crd)]


Request = Callable[[str, Mapping[str, str], str], tuple[int, bytes]]
"""(path, query, accept) -> (HTTP status, body): one GET against the API server."""


class KubernetesView:
    """`ClusterView` through the official `kubernetes` client, connected on the first read."""

    def __init__(self, context: str, kubeconfig: str = "", request: Request | None = None) -> None:
        self.context = context
        self.kubeconfig = kubeconfig
        self._request = request

    def get(self, ref: ObjectRef) -> Manifest | None:
        return self._object(ref, "application/json")

    def metadata(self, ref: ObjectRef) -> Manifest | None:
        return self._object(ref, METADATA_ONLY)

    def list(self, ref: ObjectRef, selector: Mapping[str, str] | None = None) -> list[Manifest]:
        status, body = self._send(ref.collection_path(), dict(selector or {}), "application/json")
        if status != 200:
            raise LiveReadError(_refusal(f"{ref.kind} in {ref.namespace}", status, body))
        items: list[Manifest] = json.loads(body).get("items") or []
        return items

    def _object(self, ref: ObjectRef, accept: str) -> Manifest | None:
        status, body = self._send(ref.path(), {}, accept)
        if status == 404:
            return None
        if status != 200:
            raise LiveReadError(_refusal(str(ref), status, body))
        found: Manifest = json.loads(body)
        return found

    def _send(self, path: str, query: Mapping[str, str], accept: str) -> tuple[int, bytes]:
        if self._request is None:
            self._request = _connect(self.context, self.kubeconfig)
        try:
            return self._request(path, query, accept)
        except LiveReadError:
            raise
        except Exception as error:  # noqa: BLE001 -- any transport failure: the cluster is unknown
            raise LiveReadError(f"{type(error).__name__}: {first_line(error)}") from None


def connect(context: str, kubeconfig: str = "") -> ClusterView:
    """The live view of the program (`__main__.py`); the offline runs put their own in its place."""
    return KubernetesView(context, kubeconfig)


def _connect(context: str, kubeconfig: str) -> Request:
    """A GET through the `kubernetes` client, for `context` of `kubeconfig` (`api_client`)."""
    try:
        api = api_client(kubeconfig or None, context)
    except KubeconfigError as error:
        raise LiveReadError(str(error)) from None

    def request(path: str, query: Mapping[str, str], accept: str) -> tuple[int, bytes]:
        method, url, headers, _, _ = api.param_serialize(
            method="GET",
            resource_path=path,
            query_params=list(query.items()),
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        try:
            response = api.call_api(method, url, headers, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        except Exception as error:  # the client's ApiException carries the request's headers
            status = getattr(error, "status", None)
            if isinstance(status, int) and status:
                body = getattr(error, "body", None) or b""
                return status, body.encode() if isinstance(body, str) else bytes(body)
            raise
        response.read()
        return int(response.status), bytes(response.data or b"")

    return request


def _refusal(what: str, status: int, body: bytes | str) -> str:
    """What the API server said of a refused read: its Status message, else the HTTP status."""
    try:
        message = str(json.loads(body).get("message") or "")
    except ValueError:
        message = ""
    return f"reading {what}: HTTP {status}" + (f": {message}" if message else "")
