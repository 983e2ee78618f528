"""What every target shares, pure: the workload and its datasets, AIPerf's arguments, the pod
programs' config and plan, what a program's log means, results, and the A/B report."""
