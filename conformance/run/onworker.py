"""A backend on the workers of a run in units (conformance/cluster.py): the resource tag its
units need, the environment it runs in there, the probe that declares it on a worker, and
the backends a worker process keeps open from one unit to the next.

    fwd = forwarded()                   # the TINYSPEC_* variables that choose how backends run, as set here
    tag = backend_tag("tinygrad", fwd)  # "tinygrad"; "tinygrad.CUDA" where TINYSPEC_TINYGRAD_DEVICE=CUDA
    r = kept(key, open_it, close_it)    # this process's backend for `key`, opened once
    close_kept()                        # at the end of a run, on every worker

A unit runs its backend under the environment of the command that planned it (the
variables of tinyspec.environment.VARIABLES, less the cache folder and the scheduler: set
or unset as they are there), so a worker computes what one process would. Its tag is the
backend's name, and NAME.DEVICE where the backend has a `device_variable` (tinyspec.backends)
that the command's environment sets: a worker has it when its --resources say so, or when
the probe opens the backend there under that environment.
"""
from __future__ import annotations
import logging
import os
from tinyspec.environment import VARIABLES
from tinyspec.conformance.run.execute import resolve_backend
from tinyspec.backends import get_backend

_KEPT: dict = {}   # key -> (backend object, its close function): what this process keeps open between units


def forwarded() -> tuple:
  """((variable, value or None), ...): the variables a unit's backend runs under, as this
  process has them (None: unset)."""
  return tuple((v, os.environ.get(v)) for v in VARIABLES if v not in ("TINYSPEC_CACHE", "TINYSPEC_SCHEDULER"))


def environment(fwd: tuple) -> dict:
  """This process's environment with the forwarded variables as the planning command had them."""
  env = dict(os.environ)
  for k, v in fwd:
    if v is None: env.pop(k, None)
    else: env[k] = v
  return env


def backend_tag(spec: str, fwd: tuple) -> str:
  """The resource a unit for backend `spec` needs: its name (an external one's provisional
  name), and .DEVICE where its device variable is set in `fwd`. KeyError for an unknown backend."""
  b = resolve_backend(spec)
  if not b.python: return b.label
  try: var = getattr(get_backend(spec), "device_variable", None)
  except Exception:   # (a backend that cannot even be made here: its name alone, the workers decide)
    var = None
  device = dict(fwd).get(var) if var else None
  return f"{b.label}.{device.strip()}" if device and device.strip() else b.label


def kept(key, open_it, close_it):
  """The object open_it() made for `key` in this process (made now the first time);
  close_it(obj) ends it at close_kept()."""
  if key not in _KEPT: _KEPT[key] = (open_it(), close_it)
  return _KEPT[key][0]


def keep(key, obj, close_it) -> None:
  """Keep `obj`, opened already, as kept() would have made it."""
  _KEPT[key] = (obj, close_it)


def close_kept() -> None:
  """Everything this process keeps open closed (the end of a run: what run_units' cleanup calls on every worker)."""
  while _KEPT:
    obj, close_it = _KEPT.popitem()[1]
    try: close_it(obj)
    except Exception as e:   # one that cannot close cleanly does not keep the others open
      logging.getLogger("tinyspec").warning(f"tinyspec: closing {obj!r}: {e}")


def probe_each(jobs: dict, opener) -> list[str]:
  """The tags of `jobs` (tag -> job) whose backend opener(job) opens here (kept for the units)."""
  have = []
  for tag, job in jobs.items():
    try: opener(job)
    except Exception:   # unavailable here (the reason is the backend's; a run where no worker has it says so)
      continue
    have.append(tag)
  return have
