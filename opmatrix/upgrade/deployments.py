"""The supported-deployments table: per kernel, device and toolchain, what to ship, from the verdicts of stored
runs (their verdicts.json, run.json and rows; nothing is run).

A toolchain is what the cell imported, not what the matrix called it: rows are keyed by (kernel, device, toolchain
fingerprint), the hash of the imported versions (opmatrix.upgrade.history.fingerprint), so one set of versions
run under several matrix labels (`host`, `tl015`, `tonight`) is one line, naming the labels. When several runs
decided the same line, the latest one counts and says so; a run that did not measure the framework there (`not
judged`: its spec or its environment failed) decides nothing, and the line stays the last run that did. Only kernels the project has count (`kernels`: the
shipped ones, the project's own, installed packages'), so a kernel that exists only for a test is left out.

    supported            adopt X, or keep the framework: ship that backend
    supported (caveat)   the framework runs, but a contestant was inconclusive: more rounds could change it
    unsupported          gap: the framework does not run correctly there (a separate implementation is needed)
    not tested           no host ran the device (the builds made for it are named)

Each line also names the known-good versions of the backend it ships: from the nightly history (reports/history,
opmatrix.upgrade.history), the toolchain fingerprints under which every row of that (kernel, backend, device) was
`ok` and inside its performance band, with their first and last night; "" when the history holds none.
"""
from __future__ import annotations

import datetime
import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from opmatrix.decide.verdicts import ADOPT, GAP, INCONCLUSIVE, KEEP, NOT_JUDGED, NOT_RUN
from opmatrix.manifest import RunManifest
from opmatrix.store import VERDICTS_JSON, read_manifest

SUPPORT = {ADOPT: "supported", KEEP: "supported", INCONCLUSIVE: "supported (caveat)", GAP: "unsupported",
           NOT_RUN: "not tested"}


@dataclass
class Deployment:
    kernel: str
    device: str
    fingerprint: str  # of the versions below ("" where no row imported anything)
    versions: str  # what the cell imported: python, torch, triton, tilelang, driver, runtime
    labels: str  # the matrix toolchain names these versions ran under, in the runs read
    support: str
    use: str  # the backend to ship ("" when unsupported)
    why: str
    run_id: str
    date: str
    known_good: str = ""  # the versions under which `use` was ok and in its performance band (nightly history)


def since_time(text: str) -> datetime.datetime:
    """--since: an ISO date or date and time (UTC unless it says otherwise); ValueError when it is neither."""
    when = datetime.datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def deployments(run_dirs: list[Path], known_good: list | None = None, kernels=None,
                since: datetime.datetime | None = None, last: int | None = None) -> list[Deployment]:
    """One line per (kernel, device, toolchain fingerprint), the latest run winning. known_good: the ranges of
    opmatrix.upgrade.history.known_good (default: from reports/history when it exists); kernels: the kernel names
    to keep (default: all); since: only runs started at or after it; last: only the latest this many runs (of
    those with verdicts, after `since`)."""
    ranges = _history_known_good() if known_good is None else known_good
    runs = [(folder, read_manifest(folder) or RunManifest(run_id=folder.name)) for folder in run_dirs
            if (folder / VERDICTS_JSON).is_file()]
    runs = sorted((r for r in runs if since is None or _started(r[1]) >= since), key=lambda r: _started(r[1]))
    runs = runs[-last:] if last else runs
    latest: dict[tuple, Deployment] = {}
    labels: dict[tuple, set[str]] = {}
    for folder, manifest in runs:
        versions = _versions(folder)
        for v in json.loads((folder / VERDICTS_JSON).read_text()):
            if (kernels is not None and v["kernel"] not in kernels) or v["verdict"] == NOT_JUDGED:
                continue  # a run that did not measure the framework (its spec or environment failed) decides nothing
            support = SUPPORT.get(v["verdict"], "unsupported")
            use = v["choice"] if support.startswith("supported") else ""
            if v["verdict"] == INCONCLUSIVE:
                use = manifest.acceptance.baseline
            imprint, text = versions.get((v["device"], v["toolchain"]), ("", ""))
            key = (v["kernel"], v["device"], imprint)
            labels.setdefault(key, set()).add(v["toolchain"])
            latest[key] = Deployment(*key, text, "", support, use, v["reason"], manifest.run_id,
                                     manifest.finished_at or manifest.started_at,
                                     _known_good_text(ranges, v["kernel"], v["device"], use))
    for key, row in latest.items():
        row.labels = ", ".join(sorted(labels[key]))
    return sorted(latest.values(), key=lambda d: (d.kernel, d.device, d.versions, d.fingerprint))


def _history_known_good() -> list:
    """The known-good ranges of the nightly history under reports/history; none when there is no history."""
    from opmatrix.upgrade import history

    if not history.HISTORY.is_dir():
        return []
    return history.known_good(history.read_history(history.HISTORY))


def _known_good_text(ranges: list, kernel: str, device: str, use: str) -> str:
    """'; '-joined texts of the ranges of this kernel, device and backend[variant]; "" without a backend."""
    if not use:
        return ""
    return "; ".join(r.text() for r in ranges if (r.kernel, r.device, r.backend) == (kernel, device, use))


def _started(manifest: RunManifest) -> datetime.datetime:
    """When the run started (runs without a start time sort first)."""
    try:
        return since_time(manifest.started_at)
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


def _versions(folder: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(device, toolchain) -> (fingerprint, versions text) of what its rows imported: the most common set among
    the rows that imported torch (a row that failed before importing anything says nothing)."""
    from opmatrix.store import ResultStore
    from opmatrix.upgrade.history import VERSION_FIELDS, fingerprint, versions_text

    seen: dict[tuple[str, str], Counter] = {}
    for r in ResultStore(folder, create=False).results():
        if r.torch:
            imported = tuple((name, str(getattr(r, name) or "")) for name in VERSION_FIELDS)
            seen.setdefault((r.device, r.toolchain), Counter())[imported] += 1
    out = {}
    for cell, counts in seen.items():
        versions = dict(counts.most_common(1)[0][0])
        out[cell] = (fingerprint(versions), versions_text(versions))
    return out


def markdown(rows: list[Deployment]) -> str:
    from tabulate import tabulate

    from opmatrix.mdtable import cell

    lines = ["# Supported deployments", ""]
    for kernel in sorted({d.kernel for d in rows}):
        lines += [f"## {kernel}", ""]
        table = [[cell(x) for x in (d.device, d.versions or "(none imported)", d.labels, d.support, d.use, d.why,
                                    d.run_id, d.date, d.known_good)] for d in rows if d.kernel == kernel]
        lines += [tabulate(table, headers=["device", "toolchain (imported versions)", "matrix labels", "support",
                                           "use", "why", "run", "date", "known good"], tablefmt="github"), ""]
    return "\n".join(lines)


def to_json(rows: list[Deployment]) -> str:
    return json.dumps([asdict(d) for d in rows], indent=1)
