"""tinygrad's own test suite through the importer (docs/tinygrad-suite.md).

    scripts/tinygrad-suite.sh CHECKOUT          # sets up .venv-tinygrad-suite, runs the suite, reports

A pytest plugin (`-p tinyspec.interop.suite.plugin`) loaded into tinygrad's own pytest run
captures every realize of every test (interop.capture), imports each schedule (the tensor
graph, each kernel, each lowered program), validates it, evaluates it with the reference
evaluator and compares with tinygrad's values (interop.script's GraphResult.check). Each
schedule is one JSON line (records.py); what fails is classified by the rules of
classes.yaml (classify.py); `python -m tinyspec.interop.suite report DIR` prints every
failure with its class and, last, the summary line.
"""
