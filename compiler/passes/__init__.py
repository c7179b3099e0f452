"""The lowering stages' rules, in pipeline order (compiler/pipeline.py STAGES runs them):

  callify -> rangeify (+ snapshots) -> optimize (split, opts: heuristics, tiles; layout)
  -> expand (accumulate) -> isel (gates) -> linearize -> memplan

Every change to a graph goes through the core's engine, tinyspec/rewrite.py: named rules
in rule sets, applied as steps with their context (steps.py); a schedule stage's rules
replace one kernel by others. What a rule needs to know about a kernel it asks
compiler/analysis, which never changes a graph.
"""
