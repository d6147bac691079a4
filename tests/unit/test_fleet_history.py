"""The history of a fleet: the canary and the stable devices of one GPU model are two series (a device's driver
range is part of what it is), and a night on which a host's driver moved is named by the change point it causes.
Stored runs are written with the facts their cells would have probed (driver, runtime: inputs); appending, the
series and the change points are the real code (opmatrix.upgrade.history)."""
import numpy as np

from opmatrix.core.result import Result
from opmatrix.store import ResultStore, RunManifest
from opmatrix.upgrade.history import append_run, read_history, trends

NIGHTS, DRIVER_NIGHT = 8, 4  # the stable hosts get driver 590 on this night, and the kernel is 10 % slower after


def write_night(reports, i: int, rng) -> None:
    run_id = f"fleet-{i:02d}"
    store = ResultStore(reports / run_id)
    stable_driver = "590.48.01" if i >= DRIVER_NIGHT else "580.95.05"
    for device, driver, slower in (("h200-stable", stable_driver, 1.10 if i >= DRIVER_NIGHT else 1.0),
                                   ("h200-canary", "590.48.01", 1.10)):
        store.append(Result(run_id=run_id, cell=f"{device}.host", device=device, toolchain="host", kernel="k",
                            workload="w", dtype="float16", backend="triton", status="ok", torch="2.11.0",
                            triton="3.6.0", driver=driver, runtime="cuda 13.0",
                            median_ms=slower * float(np.exp(rng.normal(0, 0.01)))))
    store.write_manifest(RunManifest(run_id=run_id, started_at=f"2026-12-{i + 1:02d}T03:00:00+00:00",
                                     baseline="torch"))
    append_run(reports / run_id, reports / "history")


def test_a_driver_update_is_named_by_its_change_point_and_canary_and_stable_are_two_series(tmp_path):
    rng = np.random.default_rng(11)
    for i in range(NIGHTS):
        write_night(tmp_path, i, rng)
    series = {t.device: t for t in trends(read_history(tmp_path / "history"))}
    assert set(series) == {"h200-stable", "h200-canary"}
    [shift] = series["h200-stable"].shifts
    assert (shift.index, shift.run_id) == (DRIVER_NIGHT, f"fleet-{DRIVER_NIGHT:02d}")
    assert shift.changed == "driver 580.95.05 → 590.48.01"
    assert series["h200-canary"].shifts == []  # always on 590: no change
