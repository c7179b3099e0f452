"""Hypothesis strategies for tinyspec graphs, drawn from the tables (implemented in
conformance/fuzz/: graphs.py draws valid graphs, mutations.py breaks them, drawforms.py
and strategies.yaml say how an op's constrained shapes and args are drawn):

    from tinyspec.conformance.strategies import graphs, invalid_graphs
    @given(graphs("tensor"))            # valid by construction; .graph, .inputs, .outputs
    @given(invalid_graphs("tensor"))    # .graph breaks .rule at .node
"""
from tinyspec.conformance.fuzz.drawforms import hints, from_schema
from tinyspec.conformance.fuzz.graphs import Drawn, graphs, values, arrays, shapes, drawable_ops, value_dtypes
from tinyspec.conformance.fuzz.mutations import Mutant, invalid_graphs, mutation_rules

__all__ = ["graphs", "invalid_graphs", "Drawn", "Mutant", "values", "arrays", "shapes", "drawable_ops", "value_dtypes",
           "mutation_rules", "hints", "from_schema"]
