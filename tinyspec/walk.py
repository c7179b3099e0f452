"""A demand-driven graph walk without recursion: the importer's and the compiler's kernel builder
(compiler/passes/rangeify.py) build their graphs through it.

Each key (a node and whatever context it is wanted in) is computed by a generator that
`yield`s the keys it needs and receives their values back; `drive` runs the generators
with an explicit stack, so graphs of any depth are walked without Python recursion, and
each key is computed once (memo). A key that needs no other key (a constant, an input) is
computed by a plain function: its return value is the key's value.
"""
from __future__ import annotations
from types import GeneratorType


def drive(key, start, memo: dict):
  """The value of key. start(key) makes the key's generator (or gives its value); memo maps
  keys to values."""
  if key in memo: return memo[key]
  first = start(key)
  if not isinstance(first, GeneratorType):
    memo[key] = first
    return first
  stack = [(key, first)]
  send = None
  while stack:
    k, gen = stack[-1]
    try:
      req = gen.send(send)
    except StopIteration as e:
      memo[k] = send = e.value
      stack.pop()
      continue
    if req in memo: send = memo[req]; continue
    made = start(req)
    if isinstance(made, GeneratorType): stack.append((req, made)); send = None
    else: memo[req] = send = made
  return memo[key]
