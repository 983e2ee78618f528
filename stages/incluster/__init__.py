"""The smoke and perf programs: what runs in the cluster's pods, and, unchanged, on this machine.

Standard library only. On a cluster the stage puts these files into the Job's ConfigMap, mounted at
the same relative paths (`/config/stages/incluster/...`), and the pod runs `python -m
stages.incluster.smoke_pod` with the image's bare Python; the lab lays the same files out in a
directory and runs them with `python -S` (no site-packages), so nothing here can import the
project's other modules or any third-party package without failing there first.
"""
