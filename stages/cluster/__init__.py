"""The cluster target: the stages as Kubernetes Jobs in the stack's namespace, followed to the end.

`manifests` builds the objects and their pod template (pure), `api` is the seam to the cluster and
`kubernetes_api` its adapter to the official client, `job_runner` replaces, submits and follows
a Job, and `run` puts them together for smoke and perf.
"""
