"""The supported-deployments table from stored verdicts: one line per (kernel, device, toolchain fingerprint: the
versions the cell imported), the latest run winning, with the run, date, versions and the matrix labels as
evidence; --since / --runs choose the runs, and kernels the project does not have (test-only ones) are left out."""
import datetime
import json

import pytest

from opmatrix.cli import main
from opmatrix.upgrade.deployments import deployments, markdown, to_json
from tests.verdict_runs import run_folder


def verdict(device, kind, choice="", reason="why", toolchain="host", kernel="k"):
    return {"kernel": kernel, "device": device, "toolchain": toolchain, "verdict": kind, "choice": choice,
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
    assert rows["h200"].labels == "host" and len(rows["h200"].fingerprint) > 6 and rows["mi300x"].fingerprint == ""
    assert ("| h200     | torch 2.11.0, triton 3.6.0, driver 580.159.04, cuda 13.0 | host            | supported"
            in markdown(list(rows.values())))
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


def test_one_set_of_imported_versions_under_several_matrix_labels_is_one_line(tmp_path):
    runs = [run_folder(tmp_path, "a", "2026-11-30T01:00:00+00:00", [verdict("h200", "keep framework", "torch")]),
            run_folder(tmp_path, "b", "2026-11-30T02:00:00+00:00",
                       [verdict("h200", "adopt", "triton", toolchain="tonight")], toolchain="tonight"),
            run_folder(tmp_path, "c", "2026-11-30T03:00:00+00:00",
                       [verdict("h200", "adopt", "tilelang", toolchain="tl014")], toolchain="tl014", triton="3.5.0")]
    rows = deployments(runs, known_good=[])
    assert [(d.labels, d.use, d.run_id) for d in rows] == [("tl014", "tilelang", "c"), ("host, tonight", "triton", "b")]
    assert rows[0].versions == "torch 2.11.0, triton 3.5.0, driver 580.159.04, cuda 13.0"
    assert rows[0].fingerprint != rows[1].fingerprint


def test_since_and_last_choose_the_runs_read(tmp_path):
    runs = [run_folder(tmp_path, f"r{day}", f"2026-11-{day}T00:00:00+00:00",
                       [verdict("h200", "adopt", f"b{day}")]) for day in (10, 20, 30)]
    since = datetime.datetime(2026, 11, 15, tzinfo=datetime.timezone.utc)
    assert [d.run_id for d in deployments(runs, known_good=[])] == ["r30"]  # the latest wins
    assert [d.use for d in deployments(runs, known_good=[], last=2)] == ["b30"]
    olds = deployments(runs, known_good=[], since=since, last=1)
    assert [d.run_id for d in olds] == ["r30"]
    assert deployments(runs[:2], known_good=[], since=since)[0].run_id == "r20"
    assert deployments(runs[:1], known_good=[], since=since) == []


def test_kernels_the_project_does_not_have_are_left_out(tmp_path):
    run = run_folder(tmp_path, "r", "2026-11-30T00:00:00+00:00",
                     [verdict("h200", "adopt", "triton"), verdict("h200", "keep framework", "torch", kernel="gpufault")])
    assert {d.kernel for d in deployments([run], known_good=[])} == {"k", "gpufault"}
    assert {d.kernel for d in deployments([run], known_good=[], kernels={"k", "rmsnorm"})} == {"k"}


def test_the_command_reads_shipped_kernels_only_and_refuses_a_bad_since(tmp_path, capsys):
    run_folder(tmp_path, "r", "2026-11-30T00:00:00+00:00",
               [verdict("h200", "adopt", "triton", kernel="rmsnorm"), verdict("h200", "adopt", "x", kernel="gpufault")])

    def deploy(*args):
        capsys.readouterr()
        code = main(["deployments", "--reports", str(tmp_path), *args])
        return code, capsys.readouterr()
    code, out = deploy("--json", "--since", "2026-11-29")
    assert code == 0, out.err
    assert [(d["kernel"], d["use"], d["labels"]) for d in json.loads(out.out)] == [("rmsnorm", "triton", "host")]
    assert deploy("--since", "2026-12-01")[0] == 2  # no run that recent: nothing to show, said
    code, out = deploy("--since", "last tuesday")
    assert code == 2 and "--since 'last tuesday': not a date" in out.err
    assert deploy("--runs", "0")[0] == 2
    code, out = deploy("r", "--json")  # a run named on the command line: everything it decided, as asked
    assert code == 0 and {d["kernel"] for d in json.loads(out.out)} == {"rmsnorm", "gpufault"}


@pytest.mark.parametrize("text", ["2026-11-30", "2026-11-30T12:00", "2026-11-30T12:00:00+00:00"])
def test_since_reads_dates_and_times_as_utc(text):
    from opmatrix.upgrade.deployments import since_time

    assert since_time(text).tzinfo is not None and since_time(text).date() == datetime.date(2026, 11, 30)
