"""Pictures of a folder written by `tinyspec compile --dump-stages DIR`: one graph file
per stage, NN_stage.json (or NN_stage.kK.json, one per kernel), each a valid graph.
A stage is shown side by side with the next; the boxes of nodes that the previous
stage does not have (compared as hash-consed UOps: same op, sources, arg, declared
dtype and shape) are marked new."""
from __future__ import annotations
import re
from dataclasses import dataclass
from pathlib import Path
from tinyspec.validate import validate_file
from tinyspec.show.model import picture

STAGE_FILE = re.compile(r"^(\d+)_([A-Za-z0-9_-]+?)(?:\.k(\d+))?\.json$")


@dataclass
class Stage:
  number: int
  name: str
  files: list          # Paths, one per kernel where the stage is per kernel

  @property
  def label(self) -> str: return f"{self.number:02d}_{self.name}"


class StageError(Exception):
  """The folder is not a --dump-stages folder, or the stage asked for is not in it."""


def stages(folder) -> list[Stage]:
  """The stages in a --dump-stages folder, in order."""
  d = Path(folder)
  found: dict[tuple, list] = {}
  try: names = sorted(p.name for p in d.iterdir())
  except OSError as e: raise StageError(f"{folder}: cannot read the folder: {e.strerror or e}") from None
  for name in names:
    m = STAGE_FILE.match(name)
    if m: found.setdefault((int(m.group(1)), m.group(2)), []).append((int(m.group(3) or 0), d / name))
  if not found:
    raise StageError(f"{folder}: no stage files (NN_stage.json); show a folder written by `tinyspec compile --dump-stages DIR`")
  return [Stage(n, name, [p for _, p in sorted(fs)]) for (n, name), fs in sorted(found.items())]


def pick(all_stages: list[Stage], which: str | None) -> list[Stage]:
  """`which` (a stage number or name) and the stage after it; None: every stage."""
  if which is None: return all_stages
  for k, s in enumerate(all_stages):
    if which in (s.name, s.label, str(s.number), f"{s.number:02d}"): return all_stages[k:k + 2]
  known = ", ".join(s.label for s in all_stages)
  raise StageError(f"no stage {which!r} (the stages are {known})")


def stage_pictures(folder, which: str | None = None, **picture_options) -> list:
  """One Picture per stage file, in order (a stage and the next, with `which`); nodes new
  since the previous stage are marked."""
  out, previous_ids, keep_alive = [], None, []
  for stage in pick(stages(folder), which):
    ids, alive = set(), []
    for f in stage.files:
      res = validate_file(f, picture_options.get("level", "auto"))
      if res.graph is None:
        raise StageError("\n".join(d.format() for d in res.diagnostics))
      title = stage.label + (f" kernel {f.name.split('.')[-2][1:]}" if len(stage.files) > 1 else "")
      pic = picture(res.graph, result=res, title=title, file=str(f), **{k: v for k, v in picture_options.items() if k != "level"})
      uops = _uops(res.graph)
      alive.append(uops)
      if uops is not None:
        ids |= {id(u) for u in uops}
        if previous_ids is not None: _mark_new(pic, uops, previous_ids)
      out.append(pic)
    keep_alive.append(alive)            # hash-consing: the previous stage's UOps must stay alive to be found again
    previous_ids = ids
  return out


def _uops(graph):
  try: return graph.uops()
  except (ValueError, TypeError): return None


def _mark_new(pic, uops, previous_ids) -> None:
  for it in pic.items:
    if it.kind == "node" and id(uops[it.nodes[0]]) not in previous_ids: it.new = True
  total = sum(1 for u in uops if id(u) not in previous_ids)
  pic.notes.insert(0, f"{total:,} nodes new since the previous stage (green)" if total else "no node new since the previous stage")
