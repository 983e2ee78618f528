"""The local target: the pod programs run as processes on this machine, against a graph on loopback.

The smoke and perf programs (`stages.incluster`) and their config and plan (`stages.core.pod_plans`)
are exactly what the cluster's Jobs run; only where they run differs. What the stages cannot know
about the graph (which AIPerf, which tokenizer, what stands in for a video) is passed in as
`LocalTools` by whoever owns the graph: the lab.
"""
