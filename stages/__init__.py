"""Test stages: smoke, perf, report and archive, run against a stack's outputs (cluster or lab)."""
