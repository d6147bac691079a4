"""The analysis tools behind the NOTES run on the committed runs and say what they claim to."""
import importlib.util
import re
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_aa_noise_separates_launch_bound_calls_from_device_bound_ones(capsys):
    assert tool("aa_noise").main(["20261130-h200-model"]) == 0
    lines = capsys.readouterr().out.splitlines()
    decode = next(line for line in lines if line.startswith("rope") and "llama_decode" in line)
    prefill = next(line for line in lines if line.startswith("rope") and "llama_prefill" in line)
    assert " launch " in decode and " device " in prefill  # 0.125 ms of host-side launches vs 0.48 ms of copies


def test_aa_noise_by_distance_buckets_every_paired_round(capsys):
    runs = ["20261130-h200-decide-a"]
    buckets = tool("aa_noise").by_distance(runs, "gemm_relu")
    assert buckets and all(values for values in buckets.values())
    tool("aa_noise").print_by_distance(runs, "gemm_relu")
    assert "slots apart" in capsys.readouterr().out


@pytest.mark.integration
def test_sm90_triton_gemm_configs_names_registers_and_spills(capsys, monkeypatch):
    module = tool("sm90_triton_gemm_configs")
    monkeypatch.setattr(module, "CONFIGS", module.CONFIGS[:1])  # the committed configuration only
    monkeypatch.setenv("TRITON_CACHE_DIR", "unused")  # the tool takes a cache of its own
    assert module.main(["float16"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert re.match(r"128x256x64, 8 warps, 3 stages: sm_90 cubin using wgmma, \d+ registers, "
                    r"(no spills|\d+ bytes spilled)", line), line
