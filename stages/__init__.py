"""Test stages: smoke, perf, report and archive, run against a stack's outputs (cluster or lab).

Nothing heavy is imported here: the lab's tokenizer build imports `stages.standin` with the Dynamo
venv's interpreter, which has none of the project's packages.
"""
