"""A case made from a graph file and its inputs (`tinyspec case new`, `tinyspec run --compare
ref`), and a case folder pinned again (`tinyspec case pin`).

The case is what the corpus's own are (conformance/corpus/casegen.py writes both): the
reference evaluator's outputs, the per-element bounds the tables' tolerances give (and the
portable profile's alternatives), the sha256 pin over its files. Inputs not given are
filled with the edge values of their dtypes (as the corpus fills its cases), or refused.
"""
from __future__ import annotations
import json
from pathlib import Path
from tinyspec.graph import load_file
from tinyspec.validate import validate
from tinyspec.files import FileRefused, read_text, write_file
from tinyspec.conformance.corpus.casegen import Draft, fill_inputs, input_names, write_draft
from tinyspec.conformance.corpus.cases import CASE_FILE, CaseError, _case, digest_of
from tinyspec.limits import limits


class CaseMakingError(Exception):
  """A graph, input or folder that cannot become a case: the message says why, with a rule id."""
  def __init__(self, message: str, exit_code: int = 2):
    super().__init__(message)
    self.exit_code = exit_code


def write_graph_case(folder: Path, graph_file, inputs: dict, fill: bool = True, description: str = "",
                     case_id: str | None = None, tool: str = "tinyspec case new") -> tuple[dict, list[str]]:
  """The positive case of graph_file with `inputs` (name -> array, in its buffer's dtype)
  written into folder (which must not hold a case yet): (its case.json, the names of the
  inputs filled with edge values). CaseMakingError for an unreadable or invalid graph, an
  input the graph does not have, does not fit, or (without `fill`) does not get."""
  from tinyspec.refimpl import EvalError  # noqa: PLC0415 (start-up time: tinyspec case loads the reference only to write a case)
  g, diags = load_file(graph_file)
  if g is None or any(d.fatal for d in diags):
    raise CaseMakingError("\n".join(d.format() for d in diags) or f"{graph_file}: cannot be read", max((d.exit_code for d in diags), default=2))
  res = validate(g)
  if not res.ok:
    raise CaseMakingError("\n".join(d.format().replace("<graph>", str(graph_file)) for d in res.diagnostics), 1)
  names = input_names(g, res.views)
  unknown = sorted(set(inputs) - set(names))
  if unknown:
    raise CaseMakingError(f"{graph_file}: no input {unknown[0]!r} (its inputs: {', '.join(sorted(names)) or 'none'}) [eval.input]")
  missing = sorted(set(names) - set(inputs))
  if missing and not fill:
    raise CaseMakingError(f"{graph_file}: input {missing[0]!r} is not given (--input {missing[0]}=FILE.npy) [eval.input]")
  filled = {k: v for k, v in fill_inputs(g, res.views).items() if k in missing}
  if (Path(folder) / CASE_FILE).exists(): raise CaseMakingError(f"{folder}: holds a case already [path.write]")
  try: meta = write_draft(Draft(case_id or "", g, {**inputs, **filled}, [], description), Path(folder).parent, folder=Path(folder), tool=tool)
  except EvalError as e:
    lines = [d.format().replace("<graph>", str(graph_file)) for d in e.diagnostics] or [f"{graph_file}: {e}"]
    raise CaseMakingError("\n".join(lines), e.exit_code or 1) from None
  except FileRefused as e: raise CaseMakingError(str(e), e.exit_code) from None
  except OSError as e: raise CaseMakingError(f"{folder}: cannot be written: {e.strerror or e} [path.write]") from None
  return meta, sorted(filled)


def pin(folder: Path) -> tuple[str, str]:
  """Set the sha256 of the case in folder to what its files hash to: (old pin, new pin).
  CaseMakingError for a folder that is not a readable case."""
  path = Path(folder) / CASE_FILE
  try:
    case = _case(path, Path(folder).parent)
    new = digest_of(case)
    meta = json.loads(read_text(path, limits().max_small_file, "case.json"))
  except CaseError as e: raise CaseMakingError(str(e)) from None
  except FileRefused as e: raise CaseMakingError(str(e), e.exit_code) from None
  old = str(meta.get("sha256", ""))
  if old != new:
    meta["sha256"] = new
    try: write_file(path, json.dumps(meta, indent=1, sort_keys=True) + "\n")
    except FileRefused as e: raise CaseMakingError(str(e), e.exit_code) from None
  return old, new
