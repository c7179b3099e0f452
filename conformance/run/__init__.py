"""Putting a backend through the corpora: the case runner (execute.py) and its worker
processes (protocol.py, the JSON-lines protocol and its one client; worker.py, the server
of a registered Python backend), batching (batch.py), judging a value (compare.py), the
first divergent node of a failing case (divergence.py), the results and the rule corpus's
judge (runner.py), what a failure says (failures.py), the reports (report.py,
htmlreport.py), case selection (selection.py), `[tool.tinyspec]` settings (settings.py) and
`tinyspec run --case` (repro.py)."""
