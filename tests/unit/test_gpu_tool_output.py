"""Issue 47's parsers on the CPU: what Nsight Compute and compute-sanitizer printed on an H100
(tests/data/gpu_tools_h100/, recorded by lab/capture_profiler_outputs.sh) read into a row's summary
(opmatrix.incell.ncu_summary) and findings (opmatrix.incell.sanitizer)."""
from __future__ import annotations

import textwrap

import pytest

from opmatrix.core.result import Result
from opmatrix.incell import ncu_summary, sanitizer
from tests.gpu_tool_recordings import recorded


# -- Nsight Compute's CSV ------------------------------------------------------------------------------------------

def test_the_recorded_profile_is_three_kernels_of_one_program():
    text, code = recorded("ncu-details.csv")
    assert code == 0
    launches = ncu_summary.launches(text)
    assert [ncu_summary.short_name(k.name) for k in launches] == [
        "distribution_elementwise_grid_stride_kernel", "vectorized_elementwise_kernel", "vectorized_layer_norm_kernel"]
    norm = launches[2]
    assert norm.duration_ms() == pytest.approx(25312e-6)
    assert norm.number("Registers Per Thread") == 27
    assert norm.bytes_of("Dynamic Shared Memory Per Block") == 24
    assert norm.number("Achieved Occupancy") == pytest.approx(83.78)
    assert norm.number("Compute (SM) Throughput") == pytest.approx(31.49)
    assert norm.stall() == "long_scoreboard (73.9% of the cycles between issues)"
    assert launches[1].stall() == "no_instruction (41.6% of the cycles between issues)"


def test_the_summary_sums_the_kernels_of_the_call_and_weights_their_rates_by_duration():
    summary = ncu_summary.summarize(recorded("ncu-details.csv")[0])
    durations = (43040e-6, 2208e-6, 25312e-6)  # ms, as ncu printed them (ns)
    assert summary.kernels == 3
    assert summary.kernel_ms == pytest.approx(sum(durations))
    sm = (72.62, 0.03, 31.49)
    assert summary.sm_pct == pytest.approx(sum(s * d for s, d in zip(sm, durations)) / sum(durations))
    memory = (18.31, 14.85, 58.27)
    assert summary.memory_pct == pytest.approx(sum(m * d for m, d in zip(memory, durations)) / sum(durations))
    occupancy = (50.59, 6.15, 83.78)
    assert summary.occupancy_pct == pytest.approx(sum(o * d for o, d in zip(occupancy, durations)) / sum(durations))
    # the longest kernel's own: the random fill's (43 us)
    assert (summary.main_kernel, summary.registers, summary.smem_bytes) == (
        "distribution_elementwise_grid_stride_kernel", 44, 0)
    assert summary.stall == "not_selected (34.5% of the cycles between issues)"
    line = summary.line()
    assert line.startswith("3 kernels; 70.56 us; SM 56%, memory 33%, DRAM 26% of peak; occupancy 61%; longest: "
                           "distribution_elementwise_grid_stride_kernel, 44 registers/thread, 0 B shared/block")
    assert "\n" not in line
    fields = summary.fields()
    assert set(fields) <= set(Result.__dataclass_fields__) and fields["ncu_kernels"] == 3


def test_what_is_not_a_profile():
    assert ncu_summary.summarize("") is None
    assert ncu_summary.summarize("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n") is None
    refused = ("==PROF== Connected to process 577 (/usr/bin/python3.12)\n==ERROR== ERR_NVGPUCTRPERM - The user does "
               "not have permission to access NVIDIA GPU Performance Counters on the target device 0.\n")
    reason = ncu_summary.refusal(refused)
    assert reason.startswith("not run: this host refuses GPU performance counters") and "ERR_NVGPUCTRPERM" in reason
    assert ncu_summary.refusal(recorded("ncu-details.csv")[0]) == ""
    assert ncu_summary.errors(refused).startswith("ERR_NVGPUCTRPERM - The user does not have permission")
    assert ncu_summary.number("1,956,606,550.25") == 1956606550.25 and ncu_summary.number("n/a") is None


# -- compute-sanitizer's output ------------------------------------------------------------------------------------

def test_initcheck_found_the_read_past_the_end_and_memcheck_did_not():
    init = sanitizer.parse(recorded("sanitizer-initcheck-oob.txt")[0], "initcheck")
    assert (init.count, init.found, init.finished) == (512, True, True)
    assert len(init.findings) == 10  # --print-limit 10; the summary counts all of them
    assert init.first == ("Uninitialized __global__ memory read of size 16 bytes at past_the_end+0xb0 in oob.py:6 "
                          "by thread (32,0,0) in block (1020,0,0) Address 0x7f1f5ac00200")
    assert "Host Frame" not in " ".join(init.findings)
    assert init.said() == "initcheck 512 errors"
    # inside torch's caching allocator's segment the read is in allocated memory: memcheck sees nothing
    memcheck = sanitizer.parse(recorded("sanitizer-memcheck-oob.txt")[0], "memcheck")
    assert (memcheck.count, memcheck.found, memcheck.first) == (0, False, "")
    assert memcheck.said() == "memcheck 0 errors"


def test_racecheck_and_an_honest_program_find_nothing():
    race = sanitizer.parse(recorded("sanitizer-racecheck-oob.txt")[0], "racecheck")
    assert (race.count, race.warnings, race.found) == (0, 0, False)
    assert race.said() == "racecheck 0 hazards"
    honest = sanitizer.parse(recorded("sanitizer-memcheck-honest.txt")[0], "memcheck")
    assert (honest.count, honest.found) == (0, False)


def test_a_memcheck_finding_a_race_and_an_unfinished_run():
    memcheck = sanitizer.parse(textwrap.dedent("""\
        ========= COMPUTE-SANITIZER
        ========= Invalid __global__ read of size 4 bytes
        =========     at _doubled+0x1b0 in triton.py:25
        =========     by thread (0,0,0) in block (0,0,0)
        =========     Address 0x7f00c0400000 is out of bounds
        =========     and is 1 bytes after the nearest allocation at 0x7f00c0000000 of size 4194304 bytes
        =========     Saved host backtrace up to driver entry point at kernel launch time
        =========         Host Frame: launch [0x1da3] in __triton_launcher.so
        =========
        ========= ERROR SUMMARY: 1 error
        """), "memcheck")
    assert (memcheck.count, memcheck.said()) == (1, "memcheck 1 error")
    assert memcheck.first.startswith("Invalid __global__ read of size 4 bytes at _doubled+0x1b0 in triton.py:25 by "
                                     "thread (0,0,0)") and memcheck.first.endswith("of size 4194304 bytes")
    race = sanitizer.parse(textwrap.dedent("""\
        ========= COMPUTE-SANITIZER
        ========= Error: Race reported between Write access at reduce+0x70 in k.cu:12
        =========     and Read access at reduce+0x90 in k.cu:14 [64 hazards]
        =========
        ========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
        """), "racecheck")
    assert (race.count, race.found, race.said()) == (1, True, "racecheck 1 hazard")
    assert race.first.startswith("Error: Race reported between Write access")
    crashed = sanitizer.parse("========= COMPUTE-SANITIZER\nTraceback (most recent call last):\n", "memcheck")
    assert (crashed.finished, crashed.found, crashed.said()) == (False, False, "memcheck did not finish")
