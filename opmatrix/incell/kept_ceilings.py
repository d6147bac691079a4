"""A host's measured ceilings, kept for the later cells on it ([run] ceilings_kept_h).

The ceilings (opmatrix.incell.ceilings) are what this device reaches with this driver, runtime and torch build: a
property of the host, not of the run. Measuring them takes a CPU cell about a second of its one core and a GPU
cell a few seconds, in every cell. A measurement is therefore kept for `ceilings_kept_h` hours and serves every later
cell whose key matches; an older one, or another key, is measured again (and kept in its turn). 0 measures in
every cell, as before.

The key: the host's name and boot (a reboot reloads drivers), the device's vendor, name and arch, the driver and
runtime, the torch build, torch's thread count (a CPU's ceilings are one thread's rates times it), and the dtypes
measured. Kept in the host's folder (opmatrix.incell.host_cache: ~/.cache/opmatrix/ceilings/<key>.json), per host
like the device itself, written atomically (two cells may measure at once: the
later file wins whole). A row whose ceilings were kept says when they were measured (Result.ceilings_kept), and so
does the report's Measurement quality section. Stdlib only.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import socket
from pathlib import Path

from opmatrix.incell import atomic, host_cache

KEY_FACTS = ("device_name", "arch", "driver", "runtime", "torch")  # of opmatrix.incell.facts.probe's output
KEY_VERSION = 1  # raise when what a key covers, or how the ceilings are measured, changes


def folder() -> Path:
    return host_cache.folder("ceilings")


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def key(vendor: str, facts: dict, threads: int, dtypes: list[str]) -> str:
    parts = {"version": KEY_VERSION, "host": socket.gethostname(), "boot": _boot_id(), "vendor": vendor,
             "threads": threads, "dtypes": sorted(dtypes), **{k: str(facts.get(k, "")) for k in KEY_FACTS}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def load(where: Path, name: str, max_age_h: float) -> dict | None:
    """The kept ceilings under `name`, with "kept_from" set to when they were measured, or None: none kept, older
    than max_age_h hours (or from the future: a clock set back), unreadable, or max_age_h is 0."""
    if max_age_h <= 0:
        return None
    try:
        entry = json.loads((where / f"{name}.json").read_text())
        measured = datetime.datetime.fromisoformat(entry["measured_at"])
        ceilings = dict(entry["ceilings"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    age_h = (now() - measured).total_seconds() / 3600
    if not 0 <= age_h <= max_age_h:
        return None
    return dict(ceilings, kept_from=entry["measured_at"])


def store(where: Path, name: str, ceilings: dict, max_age_h: float) -> None:
    """Keep freshly measured ceilings under `name` (nothing when max_age_h is 0). A folder that cannot be written
    costs only the keeping."""
    if max_age_h <= 0 or not ceilings:
        return
    entry = {"measured_at": now().isoformat(timespec="seconds"), "ceilings": ceilings}
    try:
        where.mkdir(parents=True, exist_ok=True)
        atomic.write_text(where / f"{name}.json", json.dumps(entry))
    except OSError:
        pass
