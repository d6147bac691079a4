"""What validate reads from earlier runs, never re-derived: the profile's kernel-group shares (profile.json of
`opmatrix profile`), and from a matrix run the chosen implementations (verdicts.json: `adopt X`) and each kernel's
microbenchmark speed-up over the framework (its rows, with the paired statistics of opmatrix.decide.stats): on
the workload whose shape is the model's where the run has one, else the verdict's geometric mean over the run's
workloads, said so. What is missing stays missing (None, with the reason)."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from opmatrix.core.acceptance import DEFAULT_BASELINE
from opmatrix.core.errors import UsageError
from opmatrix.core.result import split_backend_label
from opmatrix.store import VERDICTS_JSON, labelled, read_manifest
from opmatrix.sites import registry
from opmatrix.validate.swap import Choice
from opmatrix.validate.verdict import Micro

PROFILE_JSON = "profile.json"


@dataclass(frozen=True)
class ProfileShares:
    source: str  # the profile.json read
    target: str
    device: str
    shares: dict[str, float]  # kernel group -> share of the profiled step


def read_profile(name: str, reports: Path) -> ProfileShares:
    """profile.json of a profile run: a run id under reports/, a run folder, or the file itself."""
    candidates = [Path(name), Path(name) / PROFILE_JSON, Path(reports) / name / PROFILE_JSON]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise UsageError(f"--profile {name}: no {PROFILE_JSON} there or under {reports}/{name}; write one with "
                         "`opmatrix profile TARGET --run-id NAME` (same target and preset as validate)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        shares = {g["group"]: float(g["share"]) for g in data["groups"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--profile {name}: {path} is not a profile.json of opmatrix profile ({exc})") from None
    return ProfileShares(str(path), data.get("target", ""), data.get("device", ""), shares)


def chosen(folder: Path, device_vendor: str, run_device: str | None) -> list[Choice]:
    """The implementations a run's verdicts adopt for the kernels the registry wires (on the run's device of this
    vendor, or --run-device)."""
    verdicts = _verdicts(folder)
    wired = set(registry.swappable())
    relevant = [v for v in verdicts if v["kernel"] in wired]
    device = pick_device(folder.name, {v["device"] for v in relevant}, _vendors(folder), device_vendor, run_device)
    choices, kept = [], []
    for v in relevant:
        if v["device"] != device:
            continue
        split = split_backend_label(v.get("choice") or "")
        if v["verdict"] == "adopt" and split:
            choices.append(Choice(v["kernel"], *split))
        else:
            kept.append(f"{v['kernel']}: {v['verdict']} {v.get('choice') or ''}".strip())
    if not choices:
        raise UsageError(f"--from-run {folder.name}: its verdicts on {device} adopt no implementation of a wired "
                         f"kernel ({', '.join(sorted(wired))}){': ' + '; '.join(kept) if kept else ''}; nothing to "
                         "swap in. Name implementations with --use KERNEL=BACKEND to validate them anyway")
    return choices


def pick_device(run: str, devices: set[str], vendors: dict[str, str], vendor: str, run_device: str | None) -> str:
    """The run's device id that validate's device stands for: --run-device, else the only one of this vendor."""
    if run_device:
        if run_device not in devices:
            raise UsageError(f"--run-device {run_device}: run {run} has no verdicts or rows on it (its devices: "
                             f"{', '.join(sorted(devices)) or 'none'})")
        return run_device
    same = sorted(d for d in devices if vendors.get(d, "") == vendor)
    if len(same) == 1:
        return same[0]
    raise UsageError(f"run {run}: {'no' if not same else 'several'} {vendor} devices among its devices "
                     f"({', '.join(sorted(devices)) or 'none'}); name the one validate stands for with --run-device")


def micro_speedups(folder: Path, choices: list[Choice], model_workloads: dict[str, dict], dtype: str,
                   device_vendor: str, run_device: str | None, kernel_dir: Callable[[str], Path],
                   eager: dict[str, str] | None = None) -> dict[str, tuple[Micro | None, str]]:
    """kernel -> (its microbenchmark speed-up in the run, or None; the reason when None). Against the run's
    baseline, or for a kernel in `eager` (kernel -> "backend[variant]", the model's own code as a variant) against
    that variant's rows of the same rounds at the model's shape."""
    from opmatrix.decide import stats
    from opmatrix.incell import plugins
    from opmatrix.store import load_run

    df = stats.add_paired_columns(load_run(folder))
    manifest = read_manifest(folder)
    baseline = manifest.acceptance.baseline if manifest else DEFAULT_BASELINE
    kernels = {c.kernel for c in choices}
    device = pick_device(folder.name, set(df[df.kernel.isin(kernels)].device), dict(zip(df.device, df.vendor)),
                         device_vendor, run_device)
    verdicts = {v["kernel"]: v for v in _verdicts(folder, required=False) if v["device"] == device}
    out = {}
    for c in choices:
        if c.backend == baseline and c.variant == "default":
            out[c.kernel] = (Micro(1.0, None, None, f"{c.label} is run {folder.name}'s baseline, the framework's "
                                   "own formula"), "")
            continue
        rows = df[(df.kernel == c.kernel) & (df.device == device) & (df.backend == c.backend)
                  & (df.variant == c.variant) & (df.dtype == dtype) & df.speedup.notna()]
        workload = model_workloads.get(c.kernel)
        names, shape = [], None
        if workload is not None:
            spec = plugins.load_spec(kernel_dir(c.kernel), c.kernel)  # rows name workloads, and describe shapes
            names = [n for n, w in spec.WORKLOADS.items() if w == workload]
            shape = spec.describe(workload)  # a workload the run's matrix defined (opmatrix profile's workloads)
        row = next((r for r in rows.itertuples() if r.workload in names or r.shape == shape), None)
        if eager and c.kernel in eager:
            out[c.kernel] = _against_eager(df, row, eager[c.kernel], c, folder.name, device, dtype, workload)
            continue
        if row is not None:
            out[c.kernel] = (Micro(float(row.speedup), float(row.speedup_lo), float(row.speedup_hi),
                                   f"run {folder.name}, {device}, {row.workload} {dtype}: the model's shape"), "")
            continue
        candidate = next((x for x in verdicts.get(c.kernel, {}).get("candidates", []) if x["label"] == c.label), None)
        if candidate and candidate.get("geomean") is not None:
            out[c.kernel] = (Micro(float(candidate["geomean"]), candidate.get("lo"), candidate.get("hi"),
                                   f"run {folder.name}, {device}: geometric mean over its workloads; none has the "
                                   f"model's shape {workload}"), "")
        else:
            out[c.kernel] = (None, f"{c.text()}: run {folder.name} has no paired speed-up of it on {device}"
                                   f" {dtype}")
    return out


def _against_eager(df, row, eager: str, choice: Choice, run: str, device: str, dtype: str,
                   workload: dict | None) -> tuple[Micro | None, str]:
    """The choice's speed-up over the model's own code (`eager`, a variant timed in the same rounds at the model's
    shape): per round, eager's median burst over the choice's, both rows aligned on the baseline's rounds."""
    from opmatrix.decide import stats

    where = f"run {run}, {device}, {dtype}"
    if row is None:
        return None, f"{choice.text()}: {where} has no paired row of it at the model's shape {workload}"
    ref = df[(df.kernel == choice.kernel) & (df.device == device) & (df.workload == row.workload)
             & (df.dtype == dtype) & (df.status == "ok")]
    ref = ref[labelled(ref, eager)]
    if ref.empty:
        return None, (f"{choice.text()}: {where} has no {eager} row at {row.workload} (the model's own code, which "
                      f"the speed-up is taken against)")
    interval = stats.against(row, ref.iloc[0])
    if interval is None:
        return None, f"{choice.text()}: {where}: not timed in the same rounds as {eager} (or too few rounds)"
    return Micro(interval.estimate, interval.lo, interval.hi,
                 f"run {run}, {device}, {row.workload} {dtype}: the model's shape, against {eager} (the model's "
                 f"code) in the same {interval.samples} rounds"), ""


def _verdicts(folder: Path, required: bool = True) -> list[dict]:
    path = folder / VERDICTS_JSON
    if not path.is_file():
        if not required:
            return []
        raise UsageError(f"--from-run {folder.name}: no {VERDICTS_JSON} (a run timed in rounds writes it; "
                         f"`opmatrix report {folder.name}` rebuilds it)")
    return json.loads(path.read_text(encoding="utf-8"))


def _vendors(folder: Path) -> dict[str, str]:
    """device id -> vendor, from the run's rows."""
    from opmatrix.store import ResultStore

    return {r.device: r.vendor for r in ResultStore(folder, create=False).results()}
