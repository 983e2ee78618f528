"""The local lab: a real Dynamo frontend and mock-engine workers on loopback (see docs/lab.md).

Only the standard library is imported here (`lab.tiny_model` runs with the Dynamo venv's
interpreter): `common.interrupts`, so that a Ctrl-C while `python -m lab` is still importing ends
with one line and status 130.
"""

from common.interrupts import end_interrupts_quietly

end_interrupts_quietly()
