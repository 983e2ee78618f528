"""The local lab: a real Dynamo frontend and mock-engine workers on loopback (see docs/lab.md).

Nothing is imported here: `lab.tiny_model` runs with the Dynamo venv's interpreter.
"""
