"""The tinyspec conformance corpus as this project's pytest tests: one test per case, run on
the backend of pyproject.toml's [tool.tinyspec] (or --tinyspec-backend=NAME). A failing
test's node id (test_conformance.py::test_case[ADD/float32]) runs it again."""
from tinyspec.conformance.test_cases import test_case  # noqa: F401  (the corpus's test, collected here)
