"""docs/protocol.md: the backend author's manual, rendered from spec/protocol.schema.json.

Every message and key (type, default, whether it is required, what it means) comes from
the schema the runner checks answers against (conformance/run/protocol.py), the worked
session is the schema's `x-session` (tests/docgen/test_protocol_page.py runs it through
the schema and the reference), and the limits are the tables' `limits:` and the runner's
own constants, so the page cannot say what the code does not do.
"""
from __future__ import annotations
import json
from tinyspec.docgen.md import cell, code, table
from tinyspec.limits import limits
from tinyspec.conformance.run import protocol as runner_protocol

GENERATED = ("Generated from `spec/protocol.schema.json` (the form the conformance runner checks every message against) by "
             "`tinyspec docs`; do not edit by hand.")


# ------------------------------------------------------------------ a schema node in words
def type_text(node: dict) -> str:
  """A schema node's type in words: `string`, `array of string`, `"npy" or "inline"`,
  `object: name -> array`, a link to a $defs entry."""
  if "$ref" in node: return _link(node["$ref"].split("/")[-1])
  if "const" in node: return code(json.dumps(node["const"]))
  if "enum" in node: return " or ".join(code(json.dumps(v)) for v in node["enum"])
  if "oneOf" in node: return " or ".join(type_text(n) for n in node["oneOf"])
  t = node.get("type", "any")
  if isinstance(t, list): return " or ".join(t)
  if t == "array" and "items" in node: return f"array of {type_text(node['items'])}"
  if t == "object" and isinstance(node.get("additionalProperties"), dict):
    return f"object: name -> {type_text(node['additionalProperties'])}"
  if t == "object" and "properties" in node: return "object (below)"
  return t


def _link(name: str) -> str: return f"[{name}](#{name.replace('_', '-')})"


def default_text(node: dict) -> str:
  if "default" in node: return code(json.dumps(node["default"]))
  return cell(node.get("x-default", ""))


def key_table(node: dict) -> list[str]:
  required = set(node.get("required", ()))
  rows = [[code(k), type_text(v), "required" if k in required else default_text(v) or "—", cell(v.get("description", ""))]
          for k, v in node.get("properties", {}).items()]
  out = table(["key", "type", "default", "meaning"], rows)
  extra = node.get("additionalProperties", True)
  out += ["", "Other keys are refused (rule `backend.protocol`, naming the nearest known key)." if extra is False
          else "Other keys may be present (a backend ignores what it does not know)."]
  return out


# ------------------------------------------------------------------ sections
def _session(S: dict) -> list[str]:
  lines = ["## A session", "",
           "`->` is a line the runner writes to the backend's stdin, `<-` one the backend writes to its stdout. This "
           "backend takes arrays inline, runs the first graph (three float32 elements: 1 + 2 = 3, -0 + -0 = -0, NaN + 0.5 "
           "= NaN, each as its bit pattern) and refuses the second:", "", "```"]
  for who, msg in S["x-session"]:
    lines.append(("-> " if who == "runner" else "<- ") + json.dumps(msg))
  return lines + ["```"]


def _messages(S: dict) -> list[str]:
  defs = S["$defs"]
  out = ["## Messages", ""]
  for m in S["x-messages"]:
    node = defs[m["schema"]]
    out += [f"### {m['name']}", "", f"From the {m['from']}. " + node.get("description", ""), ""] + key_table(node) + [""]
    for k, v in node.get("properties", {}).items():
      ref = v.get("$ref", "").split("/")[-1]
      if ref in defs and "properties" in defs[ref]:
        out += [f"### {ref}", "", f"The `{k}` of the {m['name']}. " + defs[ref].get("description", ""), ""] + key_table(defs[ref]) + [""]
  return out


def _arrays(S: dict) -> list[str]:
  defs = S["$defs"]
  L = limits()
  out = ["## Arrays", "", "### encoding", "", "The hello offers the encodings the runner speaks (`arrays`); the backend's answer "
         "picks the one it is sent (default `npy`). " + defs["encoding"]["description"], "",
         "### array", "",
         "A string, the absolute path of a `.npy` file (NumPy's format, a plain numeric dtype, no pickles; bfloat16 has no "
         ".npy dtype: it is stored as its uint16 bit patterns and named by the run's `dtypes`), or an "
         f"{_link('inline_array')}. Output files must be written directly in the run's `out_dir`; a path anywhere else is refused.", "",
         "### inline-array", "", defs["inline_array"]["description"], ""] + key_table(defs["inline_array"])
  out += ["", f"A shape has at most limits.max_rank = {L.max_rank} dims and limits.max_numel = {L.max_numel:,} elements; "
          f"a whole message is one line of at most limits.max_line_bytes = {L.max_line_bytes:,} bytes, so inline arrays suit "
          "the corpus's small cases (a request whose arrays do not fit is that case's error, rule `file.limit`).", ""]
  out += table(["dtype", "an element of data", "example"], [
    [code("bool"), "0 or 1", code("[1, 0]")],
    [code("int8") + " ... " + code("int64") + ", " + code("index"), "the value (index is int64)", code("[-128, 127]")],
    [code("uint8") + " ... " + code("uint64"), "the value", code("[0, 18446744073709551615]")],
    [code("float16") + ", " + code("bfloat16"), "the 16-bit pattern", "float16 1.0 = " + code("15360") + ", bfloat16 1.0 = " + code("16256")],
    [code("float32"), "the 32-bit pattern", "1.0 = " + code("1065353216") + ", -0.0 = " + code("2147483648") + ", NaN = " + code("2143289344")],
    [code("float64"), "the 64-bit pattern", "1.0 = " + code("4607182418800017408")]])
  return out + [""]


def _limits_and_errors(T) -> list[str]:
  L = limits()
  out = ["## Limits", "",
         f"* **A line**: at most limits.max_line_bytes = {L.max_line_bytes:,} bytes, either way; a longer one (or one that "
         "is not one JSON object of the schema) fails the case with `backend.protocol`, and the backend is started again.",
         "* **Time**: each run may take `--timeout` seconds (default 60; `[tool.tinyspec] timeout`); past it the backend's "
         "whole process group is killed and the case is an `error`. The hello may take at least 120 s (a backend that "
         "compiles at start).",
         f"* **stderr** is the backend's own: its first {runner_protocol.BackendProcess.STDERR_HEAD:,} and last {runner_protocol.BackendProcess.STDERR_KEPT:,} "
         "bytes are kept and shown (escaped) when it dies.",
         "* **Processes**: `--workers N` starts N copies; each gets one request at a time.", "",
         "## How a case ends", ""]
  out += table(["status", "when"], [
    [code("pass"), "the outputs match (integers and bools bit-exact, floats within the case's ulp bounds), or an invalid graph is refused"],
    [code("fail"), "a wrong output, a refused valid graph, an accepted invalid one, an output that cannot be read"],
    [code("error"), "the backend crashed, hung past the timeout or broke the protocol (`backend.protocol`); or the case itself cannot be read"],
    [code("unsupported"), "the case needs an op, level, dtype or device the capabilities do not declare (not run)"],
    [code("xfail") + ", " + code("xpass"), "a failure or a pass of a case the manifest expects to fail (an xpass fails the run)"],
    [code("skip"), "the manifest excludes the case (not run)"]])
  out += ["", "The rule ids a run reports besides a graph's own:", ""]
  said = {**T.rule_catalogue, **T.io_rules}
  out += table(["rule", "meaning"], [[code(r), cell(said[r])] for r in ("backend.protocol", "backend.unavailable", "case.pin", "file.limit")])
  return out + [""]


def _manifests_and_starters() -> list[str]:
  return ["## Manifests", "",
          "A manifest is YAML with two tables, each case id (or a glob over ids) -> why: `expected_failures` (a failure is "
          "`xfail`, a pass `xpass`) and `exclude` (not run). Which one a backend gets, the first that applies: "
          "`--manifest FILE` (`--manifest none`: no manifest); the project's `[tool.tinyspec.manifests]` entry for its "
          "name; the `manifest` of its hello; the one shipped for its name; none.", "",
          "## Starting points", "",
          "```",
          "tinyspec new-backend --lang c mine        # or --lang python: a backend that passes the ADD cases",
          "cd mine && make                           # (C) builds ./backend with cc",
          "tinyspec conformance -k ADD               # the backend mine/pyproject.toml names",
          "tinyspec run --case ADD/float32           # one case, judged alone",
          "pytest                                    # the corpus as pytest tests (mine/test_conformance.py)",
          "tinyspec case new graph.json cases/MINE   # a case of your own: expected outputs from the reference, pinned",
          "```", ""]


def render_protocol_md(T) -> str:
  S = runner_protocol.schema()
  lines = ["# The backend protocol", "", GENERATED, "", S["description"], ""]
  lines += _session(S) + [""] + _messages(S) + _arrays(S) + _limits_and_errors(T) + _manifests_and_starters()
  return "\n".join(lines).rstrip() + "\n"
