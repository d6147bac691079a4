"""The supported-deployments table from stored verdicts: one line per (kernel, device, toolchain), the latest run
winning, with the run, date and versions as evidence."""
import json

from opmatrix.core.result import Result
from opmatrix.decide.deployments import deployments, markdown, to_json
from opmatrix.store import ResultStore


def run_folder(root, run_id, started, verdicts):
    folder = root / run_id
    store = ResultStore(folder)
    store.append(Result(run_id=run_id, cell="h200.host", device="h200", toolchain="host", kernel="k", workload="w",
                        dtype="float16", backend="torch", status="ok", torch="2.11.0", triton="3.6.0",
                        driver="580.159.04", runtime="cuda 13.0"))
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "started_at": started, "finished_at": started,
                                                 "baseline": "torch"}))
    (folder / "verdicts.json").write_text(json.dumps(verdicts))
    return folder


def verdict(device, kind, choice="", reason="why"):
    return {"kernel": "k", "device": device, "toolchain": "host", "verdict": kind, "choice": choice,
            "reason": reason}


def test_each_verdict_maps_to_a_support_level_and_the_latest_run_wins(tmp_path):
    old = run_folder(tmp_path, "old", "2026-11-01T00:00:00+00:00",
                     [verdict("h200", "keep framework", "torch"), verdict("mi300x", "gap", reason="no torch")])
    new = run_folder(tmp_path, "new", "2026-11-30T00:00:00+00:00",
                     [verdict("h200", "adopt", "blaslt"), verdict("b200", "not run"),
                      verdict("a100", "inconclusive", reason="straddles")])
    rows = {d.device: d for d in deployments([new, old])}
    assert (rows["h200"].support, rows["h200"].use, rows["h200"].run_id) == ("supported", "blaslt", "new")
    assert (rows["mi300x"].support, rows["mi300x"].use) == ("unsupported", "")
    assert (rows["b200"].support, rows["b200"].use) == ("not tested", "")
    assert (rows["a100"].support, rows["a100"].use) == ("supported (caveat)", "torch")
    assert rows["h200"].versions == "torch 2.11.0, triton 3.6.0, driver 580.159.04, cuda 13.0"
    assert "| h200     | host        | supported" in markdown(list(rows.values()))
    assert json.loads(to_json(list(rows.values())))[0]["kernel"] == "k"


def test_each_deployment_names_the_known_good_versions_of_the_backend_it_ships(tmp_path):
    from opmatrix.upgrade.history import KnownGood

    run = run_folder(tmp_path, "new", "2026-11-30T00:00:00+00:00",
                     [verdict("h200", "adopt", "blaslt"), verdict("mi300x", "gap", reason="no torch")])
    good = [KnownGood("k", "h200", "blaslt", "abc", "torch 2.11.0, driver 580.159.04", "2026-11-01T03:00:00+00:00",
                      "2026-11-30T03:00:00+00:00", 5),
            KnownGood("k", "h200", "torch", "abc", "torch 2.11.0", "2026-11-01T03:00:00+00:00",
                      "2026-11-30T03:00:00+00:00", 5),
            KnownGood("k", "mi300x", "blaslt", "def", "rocm 6.4", "2026-11-01T03:00:00+00:00",
                      "2026-11-02T03:00:00+00:00", 2)]
    rows = {d.device: d for d in deployments([run], known_good=good)}
    assert rows["h200"].known_good == ("torch 2.11.0, driver 580.159.04 (2026-11-01 03:00 → 2026-11-30 03:00, "
                                       "5 run(s))")
    assert rows["mi300x"].known_good == ""  # unsupported: no backend, so no versions to vouch for
    assert "known good" in markdown(list(rows.values())) and "2026-11-01 03:00" in markdown(list(rows.values()))
    assert {d["device"]: d["known_good"] for d in json.loads(to_json(list(rows.values())))}["h200"].startswith(
        "torch 2.11.0, driver")


def test_by_default_the_known_good_versions_come_from_the_history(tmp_path, monkeypatch):
    from opmatrix.upgrade import history

    run = run_folder(tmp_path, "new", "2026-11-30T00:00:00+00:00", [verdict("h200", "keep framework", "torch")])
    monkeypatch.setattr(history, "HISTORY", tmp_path / "no-history")
    assert deployments([run])[0].known_good == ""
    history.append_run(run, tmp_path / "history")
    monkeypatch.setattr(history, "HISTORY", tmp_path / "history")
    assert deployments([run])[0].known_good == ("torch 2.11.0, triton 3.6.0, driver 580.159.04, cuda 13.0 "
                                                "(2026-11-30 00:00 → 2026-11-30 00:00, 1 run(s))")
