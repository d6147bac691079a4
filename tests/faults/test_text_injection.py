"""A kernel whose error text holds terminal escape sequences (issue 29, item 4): `\\x1b[2J` clears the screen and
`\\x1b]0;pwned\\x07` sets the terminal's title when printed raw, and `cat report.md` would do the same.

One run of a matrix with a [[compare]] (`opmatrix run M --no-ray`, as a user runs it), so that every output is
written: the terminal (the progress lines and the report's tables), report.md, report.html, verdicts.json,
comparison.md / .json / .junit.xml, results.jsonl. The contestant `evil` builds in the baseline toolchain and
raises the hostile error in the candidate's (its environment sets INJECT_ENV), so the comparison calls it broken
and quotes the error in the JUnit XML too. The build also writes the sequences to stderr, which the row keeps as its
tail. No output may hold a raw control character but newline and tab (CR LF aside); the error must still be there,
written out (`\\x1b[2J`), so nothing is silently lost.
"""
from __future__ import annotations

import re
import subprocess
import textwrap
import xml.etree.ElementTree as ET

import pytest

from tests.faults import plugins
from tests.faults.harness import REPO, cli_env, opmatrix_cmd, rows

INJECT_ENV = "OPMATRIX_FAULT_INJECT"
WRITTEN_OUT = r"\x1b[2J\x1b]0;pwned\x07"  # clear the screen, set the window title (OSC 0 ... BEL): as text
# Each call sleeps half a millisecond, so the timing checks (checked against timed calls) stay clear of a busy
# machine's noise and the baseline toolchain's `evil` row is `ok`. The hostile text is built at run time (chr), so
# the traceback's source line cannot show it written out on its own.
CALL = "time.sleep(0.0005)\nout.copy_(x * 2)"
EVIL = plugins.impl(CALL, prelude="import os, sys, time", setup=f"""
if os.environ.get({INJECT_ENV!r}):
    esc, bel = chr(27), chr(7)
    sys.stderr.write("stderr " + esc + "[31mred" + esc + "[0m " + esc + "]0;pwned-stderr" + bel + chr(13) + chr(10))
    raise RuntimeError(esc + "[2J" + esc + "]0;pwned" + bel + " injected by the fault suite " + chr(0x9b) + "31m")
""")

MATRIX = f"""
name = "inject"
backends = ["torch", "evil"]
[run]
timeout_s = 60
trials = 3
warmup_ms = 0
rep_ms = 5
rounds = 10
max_rounds = 10
burst_ms = 2
burst_warmup_ms = 0
kernels_dir = "kernels"
backends_dir = "backends"
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[toolchain]]
name = "hostile"
system = true
env = {{ {INJECT_ENV} = "1" }}
[[compare]]
baseline = "host"
candidate = "hostile"
[[kernel]]
name = "inject"
workloads = {{ cpu = ["small"] }}
dtypes = {{ cpu = ["float32"] }}
"""

# Raw control characters no output may hold: every C0 control but tab and newline, DEL, C1. (CR is allowed only
# as part of CR LF, which no writer here produces: forbidden too.)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The same characters as JSON escapes: results.jsonl and the JSON outputs hold the text already made safe.
ESCAPED = re.compile(r"\\u00(?:[01][0-9a-fA-F]|7[fF]|[89][0-9a-fA-F])|\\[rbf]")


@pytest.fixture(scope="module")
def injected(tmp_path_factory):
    root = tmp_path_factory.mktemp("inject")
    adapters = {name: plugins.adapter("wallclock") for name in ("torch", "evil")}
    plugins.write_tree(root, {"inject": (plugins.TORCH_SPEC, {"torch": plugins.impl(CALL, prelude="import time"), "evil": EVIL})}, adapters)
    (root / "m.toml").write_text(textwrap.dedent(MATRIX))
    run_id = "faults-inject"
    env = {k: v for k, v in cli_env().items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                                                            INJECT_ENV)}
    env["OPMATRIX_HTML"] = "1"
    out = subprocess.run(opmatrix_cmd("run", root / "m.toml", "--no-ray", "--run-id", run_id, "--reports",
                                      root / "reports"), capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=300)
    folder = root / "reports" / run_id
    report = subprocess.run(opmatrix_cmd("report", folder), capture_output=True, text=True, cwd=REPO, env=env,
                            timeout=300)
    return out, report, folder


def _raw(text: str) -> list[str]:
    return sorted({repr(m) for m in RAW.findall(text)})


def test_the_hostile_error_is_a_row_and_reaches_every_output_written_out(injected, observe):
    out, report, folder = injected
    assert out.returncode in (0, 1), out.stderr[-3000:]
    evil = {r["cell"]: r for r in rows(folder) if r["backend"] == "evil"}
    broken = evil["cpu.hostile"]
    shown = "written out" if WRITTEN_OUT in broken["error"] else "raw or lost"
    observe("escape sequences in an error text", "compile_error, written out", f"{broken['status']}, {shown}")
    assert broken["status"] == "compile_error" and evil["cpu.host"]["status"] == "ok"
    assert WRITTEN_OUT + r" injected by the fault suite \x9b31m" in broken["error"]
    assert r"\x1b]0;pwned-stderr\x07" in broken["stderr_tail"]
    for name in ("report.md", "report.html", "comparison.md", "comparison.junit.xml"):
        assert r"\x1b[2J" in (folder / name).read_text(encoding="utf-8"), name  # shown, not dropped


@pytest.mark.parametrize("output", ["terminal of opmatrix run", "terminal of opmatrix report", "results.jsonl",
                                    "report.md", "report.html", "comparison.md", "comparison.junit.xml",
                                    "comparison.json", "results.parquet"])
def test_no_output_holds_a_raw_control_character(injected, output, observe):
    out, report, folder = injected
    if output.startswith("terminal"):
        done = out if output.endswith("run") else report
        text = done.stdout + done.stderr
        # the failure is shown (progress line, failures table; a table a pipe gets is 120 columns, its cells wrap)
        assert "injected by" in text and "pwned" in text
    elif output == "results.parquet":
        import pandas as pd

        frame = pd.read_parquet(folder / output)
        text = "\n".join(str(v) for column in ("error", "stderr_tail") for v in frame[column])
    else:
        text = (folder / output).read_text(encoding="utf-8")
    raw = _raw(text)
    escaped = sorted(set(ESCAPED.findall(text))) if output.endswith((".jsonl", ".json")) else []
    observe(f"escape sequences: {output}", "no raw control character", ", ".join(raw + escaped) or
            "no raw control character")
    assert not raw, f"{output} holds raw control characters {raw}"
    assert not escaped, f"{output} stores control characters as JSON escapes {escaped}"


def test_the_junit_xml_is_valid_and_names_the_broken_row(injected):
    _, _, folder = injected
    root = ET.parse(folder / "comparison.junit.xml").getroot()  # a raw ESC would make it invalid XML 1.0
    failures = [case for case in root.iter("testcase") if case.find("failure") is not None]
    assert [case.get("name") for case in failures] == ["evil"]
    assert r"\x1b]0;pwned\x07" in failures[0].find("failure").text


def test_a_run_in_a_terminal_shows_no_raw_sequence(injected):
    """`opmatrix report` with rich's terminal output forced on (colours, a live console): rich writes its own
    colour codes (CSI ... m), but no sequence from the data: no screen clear, no OSC title, no BEL."""
    _, _, folder = injected
    env = dict(cli_env(), FORCE_COLOR="1", TTY_COMPATIBLE="1", COLUMNS="200")
    done = subprocess.run(opmatrix_cmd("report", folder), capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout + done.stderr
    assert "\x1b[" in text  # rich did colour it: the check below runs on real terminal output
    assert "\x1b[2J" not in text and "\x1b]" not in text and "\x07" not in text and "\x9b" not in text
    assert not re.search("\x1b(?!\\[[0-9;]*m)", text), "an escape sequence other than rich's colours"
    assert "injected by the fault suite" in text
