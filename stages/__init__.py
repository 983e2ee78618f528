"""Test stages: smoke, perf, report and archive, run against a stack's outputs (cluster or lab).

Layers, each importing only those below it (checked by import-linter, `.importlinter`):

    cli                   the command line (`python -m stages`)
    ab                    the A/B orchestrator: each profile's stack up, its stages, the report
    options               command-line options the stages and the A/B share
    targets               the stage target (cluster or local), chosen once from the outputs' `target`
    cluster | local | archive
                          as Kubernetes Jobs | as local processes | results in S3
    core                  what every target shares: workload, AIPerf arguments, pod plans,
                          verdicts, results, report (pure)
    errors                every way a stage ends, with its exit status
    incluster             the pod programs themselves (standard library only)

The lab is above all of this and passes in what the local target needs (`local.run.LocalTools`).
A Ctrl-C while `python -m stages` is still importing ends with one line and status 130
(`common.interrupts`).
"""

from common.interrupts import end_interrupts_quietly

end_interrupts_quietly()
