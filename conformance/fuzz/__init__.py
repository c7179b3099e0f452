"""Property-based differential testing against the reference evaluator: graphs drawn from
the tables (graphs.py, with strategies.yaml), the properties checked on each (checks.py,
each node against localcheck.py's evaluation of it alone), the backends they run on
(runners.py), the search and its shrinking (search.py, shrink.py), `fuzz()` (driver.py),
and the sanitizer fuzz of the C backend over hostile graphs (hostile.py, sanitize.py).
The public Hypothesis strategies are tinyspec.conformance.strategies."""
