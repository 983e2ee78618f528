"""Programs that run inside the cluster's smoke and perf pods (standard library only).

The stage puts these files into the Job's ConfigMap and mounts them at the same relative paths
(`/config/stages/incluster/...`), so the pod runs `python -m stages.incluster.smoke_pod` with the
image's bare Python. Nothing here may import the project's other modules or any third-party
package: the pod has neither.
"""
