"""The calibrated prediction and capacity planner, on top of the lab graph (docs/lab-prediction.md).

A measured table (the recipe's or your own) calibrates the lab's knobs (`calibration`, from the
service times in `service_times`); the calibrated lab then predicts the other levels
(`prediction`, reported by `prediction_report`) and sizes a fleet (`capacity`). `predict_cli`
holds the `python -m lab calibrate | predict | capacity | report` commands. It runs the graph
through `lab.sweep`; nothing in the graph, the A/B or the set-up imports it.
"""
