"""Interop with real tinygrad: importing its graphs and running the conformance suite through it."""
