"""The supported-deployments table: per kernel and (device, toolchain), what to ship, from the verdicts of stored
runs (their verdicts.json, run.json and rows; nothing is run). When several runs decided the same (kernel, device,
toolchain), the latest one counts and says so.

    supported            adopt X, or keep the framework: ship that backend
    supported (caveat)   the framework runs, but a contestant was inconclusive: more rounds could change it
    unsupported          gap: the framework does not run correctly there (a separate implementation is needed)
    not tested           no host ran the device (the builds made for it are named)

Each line also names the known-good versions of the backend it ships: from the nightly history (reports/history,
opmatrix.upgrade.history), the toolchain fingerprints under which every row of that (kernel, backend, device) was
`ok` and inside its performance band, with their first and last night; "" when the history holds none.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from opmatrix.decide.verdicts import ADOPT, GAP, INCONCLUSIVE, KEEP, NOT_RUN
from opmatrix.manifest import RunManifest
from opmatrix.store import VERDICTS_JSON, read_manifest

SUPPORT = {ADOPT: "supported", KEEP: "supported", INCONCLUSIVE: "supported (caveat)", GAP: "unsupported",
           NOT_RUN: "not tested"}


@dataclass
class Deployment:
    kernel: str
    device: str
    toolchain: str
    support: str
    use: str  # the backend to ship ("" when unsupported)
    why: str
    run_id: str
    date: str
    versions: str  # what the cell imported: torch / triton / tilelang, driver, runtime
    known_good: str = ""  # the versions under which `use` was ok and in its performance band (nightly history)


def deployments(run_dirs: list[Path], known_good: list | None = None) -> list[Deployment]:
    """One line per (kernel, device, toolchain), the latest run winning. known_good: the ranges of
    opmatrix.upgrade.history.known_good (default: from reports/history when it exists)."""
    ranges = _history_known_good() if known_good is None else known_good
    latest: dict[tuple, Deployment] = {}
    for folder in sorted(run_dirs, key=_started):
        path = folder / VERDICTS_JSON
        if not path.is_file():
            continue
        manifest = read_manifest(folder) or RunManifest(run_id=folder.name)
        versions = _versions(folder)
        for v in json.loads(path.read_text()):
            support = SUPPORT.get(v["verdict"], "unsupported")
            use = v["choice"] if support.startswith("supported") else ""
            if v["verdict"] == INCONCLUSIVE:
                use = manifest.baseline
            key = (v["kernel"], v["device"], v["toolchain"])
            latest[key] = Deployment(*key, support, use, v["reason"], manifest.run_id,
                                     manifest.finished_at or manifest.started_at,
                                     versions.get((v["device"], v["toolchain"]), ""),
                                     _known_good_text(ranges, v["kernel"], v["device"], use))
    return [latest[k] for k in sorted(latest)]


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


def _started(folder: Path) -> str:
    manifest = read_manifest(folder)
    return manifest.started_at if manifest else ""


def _versions(folder: Path) -> dict[tuple[str, str], str]:
    from opmatrix.store import ResultStore

    out = {}
    for r in ResultStore(folder, create=False).results():
        if r.torch and (r.device, r.toolchain) not in out:
            parts = [f"torch {r.torch}", f"triton {r.triton}" if r.triton else "",
                     f"tilelang {r.tilelang}" if r.tilelang else "", f"driver {r.driver}" if r.driver else "",
                     r.runtime]
            out[(r.device, r.toolchain)] = ", ".join(p for p in parts if p)
    return out


def markdown(rows: list[Deployment]) -> str:
    from tabulate import tabulate

    from opmatrix.report.markdown import cell

    lines = ["# Supported deployments", ""]
    for kernel in sorted({d.kernel for d in rows}):
        lines += [f"## {kernel}", ""]
        table = [[cell(x) for x in (d.device, d.toolchain, d.support, d.use, d.why, d.run_id, d.date, d.versions,
                                    d.known_good)] for d in rows if d.kernel == kernel]
        lines += [tabulate(table, headers=["device", "toolchain", "support", "use", "why", "run", "date",
                                           "versions", "known good"], tablefmt="github"), ""]
    return "\n".join(lines)


def to_json(rows: list[Deployment]) -> str:
    return json.dumps([asdict(d) for d in rows], indent=1)
