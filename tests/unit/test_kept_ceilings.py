"""A host's ceilings kept for its later cells ([run] ceilings_kept_h, opmatrix.incell.kept_ceilings): the keeping
on its own, then the cell's probe measuring for real on this CPU, keeping, and serving the next probe. A whole
run's rows and report saying so: tests/cells/test_compile_cache.py's four real runs."""
from __future__ import annotations

import datetime
import json

import pytest

from opmatrix.incell import cell_probe, host_cache, kept_ceilings

CEILINGS = {"tflops": {"float32": 0.2}, "copy_gbps": 100.0, "how": "measured"}
FACTS = {"device_name": "Intel(R) Xeon(R)", "arch": "x86_64", "driver": "", "runtime": "cpu", "torch": "2.13.0+cpu"}


def test_kept_ceilings_serve_within_their_age_and_say_when_they_were_measured(tmp_path):
    kept_ceilings.store(tmp_path, "k", CEILINGS, max_age_h=24)
    served = kept_ceilings.load(tmp_path, "k", max_age_h=24)
    assert {k: v for k, v in served.items() if k != "kept_from"} == CEILINGS
    age = kept_ceilings.now() - datetime.datetime.fromisoformat(served["kept_from"])
    assert datetime.timedelta(0) <= age < datetime.timedelta(minutes=1)
    assert kept_ceilings.load(tmp_path, "other", max_age_h=24) is None
    assert kept_ceilings.load(tmp_path, "k", max_age_h=0) is None  # 0: every cell measures


@pytest.mark.parametrize("hours_ago", [25, -1])  # older than the limit; measured "in the future" (a clock set back)
def test_kept_ceilings_too_old_or_from_the_future_are_measured_again(tmp_path, hours_ago):
    measured = kept_ceilings.now() - datetime.timedelta(hours=hours_ago)
    (tmp_path / "k.json").write_text(json.dumps({"measured_at": measured.isoformat(), "ceilings": CEILINGS}))
    assert kept_ceilings.load(tmp_path, "k", max_age_h=24) is None
    longer = kept_ceilings.load(tmp_path, "k", max_age_h=26)  # a longer limit serves the old one, never the future
    assert (longer is not None) == (hours_ago > 0)


def test_nothing_is_kept_at_zero_hours_and_a_broken_file_is_measured_again(tmp_path):
    kept_ceilings.store(tmp_path, "k", CEILINGS, max_age_h=0)
    assert not list(tmp_path.iterdir())
    (tmp_path / "k.json").write_text("{not json")
    assert kept_ceilings.load(tmp_path, "k", max_age_h=24) is None


def test_the_key_changes_with_the_device_software_threads_and_dtypes():
    base = kept_ceilings.key("cpu", FACTS, 2, ["float32"])
    assert base == kept_ceilings.key("cpu", dict(FACTS, host="ignored: not a key fact"), 2, ["float32"])
    others = [kept_ceilings.key("cpu", dict(FACTS, torch="2.14.0+cpu"), 2, ["float32"]),
              kept_ceilings.key("cpu", dict(FACTS, device_name="AMD EPYC"), 2, ["float32"]),
              kept_ceilings.key("cpu", FACTS, 4, ["float32"]),
              kept_ceilings.key("cpu", FACTS, 2, ["float32", "bfloat16"]),
              kept_ceilings.key("nvidia", dict(FACTS, driver="580.159.04"), 0, ["float32"])]
    assert len({base, *others}) == 6


def test_the_cell_probe_measures_keeps_and_then_serves_the_ceilings(tmp_path, monkeypatch):
    """Real measurements on this CPU: the first probe measures and keeps, the second is served the same numbers
    with their time, and one run at 0 hours measures again."""
    monkeypatch.setenv(host_cache.ROOT_ENV, str(tmp_path / "kept"))

    def probe(hours: str) -> dict:
        out = tmp_path / "probe.json"
        assert cell_probe.main([str(out), "cpu", hours, "float32"]) == 0
        return json.loads(out.read_text())["ceilings"]

    first = probe("24")
    assert first["tflops"]["float32"] > 0 and "kept_from" not in first
    assert len(list((tmp_path / "kept" / "ceilings").glob("*.json"))) == 1
    second = probe("24")
    assert second.pop("kept_from") and second == first
    third = probe("0")
    assert "kept_from" not in third and third["tflops"]["float32"] > 0
