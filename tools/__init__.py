"""The user's and the reviewer's tools: render, golden, engine_goldens, validate, layer_ready, the
config reference.

A Ctrl-C while `python -m tools.<tool>` is still importing ends with one line and status 130
(`common.interrupts`).
"""

from common.interrupts import end_interrupts_quietly

end_interrupts_quietly()
