"""The corpora and what builds them: the case corpus (cases.py reads and writes the case
folders of conformance/cases/; casegen.py and templates.yaml build it from the tables;
values.py the edge values its inputs are made of), the rule corpus (rulecases.py, over
conformance/rules/), and the manifests of expected failures per backend (manifest.py,
over conformance/manifests/)."""
