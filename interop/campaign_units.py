"""The tinygrad campaign (interop/campaign.py) in units on Dask distributed
(conformance/cluster.py): `tinyspec fuzz --backend tinygrad --campaign MINUTES`.

The plan takes turns as the campaign always did: turn t on each device is a fuzz unit
(FUZZ_EXAMPLES graphs, seed --seed + t) when t % 3 == 0, a program unit (PROGRAMS_PER_TURN
programs drawn from random.Random(--seed * 1000003 + t)) when t % 3 == 1, and a composition
unit (CASES_PER_TURN Tensor-API compositions on special values, interop/compositions.py,
drawn from the same kind of generator) when t % 3 == 2. A unit needs the
resource tinygrad.DEVICE: it runs on a worker that has that device (its --resources, or
what the probe sees there: interop/campaign.py _unavailable); a device no worker has is
said once and its units do not run. Without --examples the plan has no end and the
campaign stops taking units when its minutes are spent (the units in flight then are
dropped); with --examples N it is finite (fuzz units drawing N graphs per device, each
followed by a program and a composition unit) and the same on one process, N processes and a cluster.

A unit's findings come home as JSON (a new bug's repro.py as its text, written here under
OUT/DEVICE/repros/); a new bug is printed when its first unit comes home, and the
closing summary merges the units in the plan's order.
"""
from __future__ import annotations
import random
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
import json
from tinyspec.interop import campaign as C
from tinyspec.interop.hunt import Verdict, class_counts, entry_class, ledger
from tinyspec.conformance.cluster import Unit, split, worker_name
from tinyspec.interop.compositions import CASES_PER_TURN
from tinyspec.conformance.findings import example_database
from tinyspec.conformance.fuzz.units import database_key, run_units
from tinyspec.files import check_name, make_dir, write_file

TAG = "tinygrad."   # a worker resource tinygrad.DEVICE: the device is there


def probe() -> list[str]:
  """The tinygrad devices tinyspec can run on this worker, as resource tags."""
  return [TAG + d for d in C.DEVICES if C._unavailable(d) is None]


def plan(devices, seed: int, examples: int | None = None):
  """The campaign's units in order (see the module doc); endless without `examples`."""
  fuzz_shares = split(examples, C.FUZZ_EXAMPLES) if examples is not None else None
  turn, index = 0, 0
  while fuzz_shares is None or turn < 3 * len(fuzz_shares):
    for dev in devices:
      if turn % 3 == 0:
        share = C.FUZZ_EXAMPLES if fuzz_shares is None else fuzz_shares[turn // 3]
        yield Unit("campaign-fuzz", dev, seed + turn, share, index, TAG + dev)
      elif turn % 3 == 1:
        yield Unit("campaign-programs", dev, seed * 1000003 + turn, C.PROGRAMS_PER_TURN, index, TAG + dev)
      else:
        yield Unit("campaign-compositions", dev, seed * 1000003 + turn, CASES_PER_TURN, index, TAG + dev)
      index += 1
    turn += 1


def run_unit(unit, examples: dict, triage_for) -> dict:
  """One unit on a worker: a fuzz, program or composition turn on its device (campaign.py)."""
  t0 = time.monotonic()
  work = Path(tempfile.mkdtemp(prefix="tinyspec-campaign-"))
  part = C.CampaignReport()
  db = example_database(examples.get(database_key(unit), []))
  try:
    triage = triage_for(unit.name)
    with C._device(unit.name):
      if unit.kind == "campaign-fuzz":
        C._fuzz_turn(part, unit.name, unit.seed, work / unit.name, triage, _quiet, unit.share, db, database_key(unit))
      elif unit.kind == "campaign-compositions":
        C._composition_turn(part, unit.name, random.Random(unit.seed), work / unit.name, _quiet, float("inf"))
      else:
        rng = random.Random(unit.seed)
        for _ in range(unit.share):
          part.programs += 1
          for f in C.hunt_program(C.draw_program(rng), unit.name, work / unit.name, triage): C.record(part, f, _quiet)
    new = [_new_json(key, v, text, part.repeats[key]) for key, (v, text) in part.new.items()]
  finally:
    shutil.rmtree(work, ignore_errors=True)
  return {"examples": part.examples, "programs": part.programs, "compositions": part.compositions, "known": dict(part.known), "unsupported": dict(part.unsupported),
          "new": new, "findings": _findings(unit.name, new, part.known), "worker": worker_name(),
          "seconds": time.monotonic() - t0, "saved": db.saved}


def _quiet(_line: str) -> None:
  """A unit prints nothing on its worker: its findings are printed where the campaign runs."""


def _new_json(key: tuple, v: Verdict, text: str, repeats: int) -> dict:
  repro = v.repro.read_text() if v.repro is not None and Path(v.repro).is_file() else None
  return {"key": [list(key[0]), list(key[1]), key[2], key[3]], "text": text, "repro": repro,
          "repro_name": Path(v.repro).parent.name if v.repro is not None else None, "note": v.note[:2000], "count": 1 + repeats}


def _findings(device: str, new: list, known: Counter) -> list[dict]:
  """The findings database's rows of a unit: each new bug (keyed by op, dtype class,
  device, kind of difference) and each documented one (by its id and device)."""
  out = [{"signature": json.dumps(["tinygrad", *n["key"]]), "op": "/".join(n["key"][0]), "dtype_class": "/".join(n["key"][1]),
          "device": n["key"][2], "kind": n["key"][3], "text": n["text"][:3000], "repro": n["repro"] or n["note"]} for n in new]
  out += [{"signature": json.dumps(["tinygrad-documented", bug, device]), "op": None, "dtype_class": None, "device": device,
           "kind": f"documented: {bug}", "text": f"ledger entry {bug} ({_ledger_class(bug)}, interop/tinygrad_bugs.yaml) on {device}",
           "repro": None} for bug in sorted(known)]
  return out


def _ledger_class(entry: str) -> str:
  """a bug, an acknowledged divergence or an undefined input (docs/tinygrad-bugs.md's classes)."""
  return entry_class(entry) if entry in ledger() else "bug"


# ------------------------------------------------------------------ where the campaign runs
def campaign(minutes: float, devices, out, seed: int = 0, log=print, triage_for=None, examples: int | None = None,
             scheduler: str | None = None, jobs: int = 1, db: Path | None = None, progress: bool | None = None) -> C.CampaignReport:
  """Hunt on each device for `minutes` (or until `examples` graphs per device), on the
  Dask scheduler at `scheduler` or an embedded cluster of `jobs` processes; prints each
  new bug once. triage_for(device): the backend's triage there. The report's `lost`,
  `missing` and `resumed` say what conformance/fuzz/units.py run_units said."""
  devices = list(devices or C.DEVICES)
  bad = [d for d in devices if d not in C.DEVICES]
  if bad: raise ValueError(f"--devices: no tinygrad device {', '.join(bad)} here (there are {', '.join(C.DEVICES)})")
  out = Path(out)
  rep = C.CampaignReport()
  t0 = time.monotonic()
  deadline = t0 + minutes * 60
  hunt = f"campaign seed={seed} devices={','.join(devices)} examples={examples if examples is not None else 'until the time is spent'}"
  printed: set = set()

  def on_done(unit, result):   # a new bug is printed when its first unit comes home
    for n in result.get("new", []):
      key = _key(n["key"])
      if key not in printed:
        printed.add(key)
        log(f"NEW BUG {C._key_text(key)}: {n['text']}\n  repro: {_repro_line(n, out)}")

  sample = list(plan(devices, seed, 1))
  units = list(plan(devices, seed, examples)) if examples is not None else plan(devices, seed)   # (a list: the progress line knows the total)
  ran = run_units(units, run_unit, (triage_for,), hunt, db, scheduler, jobs, probe=probe,
                  progress=progress, stop=lambda results: time.monotonic() >= deadline, label="campaign", sample=sample,
                  on_done=on_done, window=None if examples is not None else "auto")
  if len(ran.missing) == len(devices): raise ValueError(f"no worker has any of the devices {', '.join(devices)} "
                                                       f"(resources {', '.join(TAG + d for d in devices)})")
  _merge(rep, ran, out)
  rep.seconds = time.monotonic() - t0
  ran_on = [d for d in devices if TAG + d not in ran.missing]
  log(f"campaign: {rep.seconds / 60:.1f} min on {', '.join(ran_on)}: {rep.examples} graphs, {rep.programs} programs, "
      f"{rep.compositions} compositions; {len(rep.new)} new bugs, in the ledger: {class_counts(rep.known) or 'none'}"
      + (f", unsupported: {sum(rep.unsupported.values())}" if rep.unsupported else ""))
  for key, (v, text) in rep.new.items():
    log(f"NEW BUG {C._key_text(key)}: {text}\n  repro: {v.repro or 'none kept (' + v.note[:200] + ')'}"
        + (f"\n  seen {rep.repeats[key]} more time(s)" if rep.repeats[key] else ""))
  return rep


def _key(k: list) -> tuple:
  return (tuple(k[0]), tuple(k[1]), k[2], k[3])


def _repro_line(n: dict, out: Path) -> str:
  return str(_repro_path(n, out)) if n["repro"] else f"none kept ({n['note'][:200]})"


def _repro_path(n: dict, out: Path) -> Path:
  """Where a new bug's repro.py goes here: OUT/DEVICE/repros/NAME/repro.py (as hunt.keep_repro names it)."""
  return out / n["key"][2] / "repros" / check_name(n["repro_name"] or "repro", "repro's name") / "repro.py"


def _merge(rep: C.CampaignReport, ran, out: Path) -> None:
  """The units' results in the plan's order into rep; each new bug's repro written under out."""
  rep.lost, rep.missing, rep.resumed, rep.dashboard = ran.lost, ran.missing, ran.resumed, ran.dashboard
  for u in ran.order:
    r = ran.results[u.key]
    rep.examples += r["examples"]; rep.programs += r["programs"]; rep.compositions += r.get("compositions", 0)
    rep.known.update(r["known"]); rep.unsupported.update(r["unsupported"])
    for n in r["new"]:
      key = _key(n["key"])
      if key in rep.new: rep.repeats[key] += n["count"]; continue
      path = None
      if n["repro"]:
        path = _repro_path(n, out)
        make_dir(path.parent)
        write_file(path, n["repro"])
      rep.new[key] = (Verdict("new", why=n["text"], repro=path, note=n["note"]), n["text"])
      rep.repeats[key] += n["count"] - 1
