"""The lowering stages, each a function from graph (or schedule) to graph, in pipeline
order (compiler/pipeline.py runs them):

  callify -> rangeify (+ hazards) -> split -> optimize (heuristics, stage) -> layout
  -> expand -> isel -> linearize -> memplan

A pass that rewrites nodes does so through the core's engine, tinyspec/rewrite.py (named
rules with graph_rewrite, or substitute/rebuild); what it needs to know about a kernel it asks compiler/analysis.
"""
