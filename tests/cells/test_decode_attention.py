"""The decode attention kernel (kernels/decode_attention: one token's grouped-query attention over its KV cache)
through a real run on this CPU: SDPA with enable_gqa and torch.compile of it are `ok` against the fp64 reference on
both input kinds and timed in rounds; our Triton split-cache kernel is checked by Triton's interpreter
(correctness only) and builds for an H200 and an MI300X no host has; FlashInfer, NVIDIA-only, says so in one line.
Its GPU rows are owed to a GPU run (matrix/h200-contestants.toml)."""
import json

import pytest

from opmatrix import cli, paths
from opmatrix.core.jobs import DeviceInfo
from opmatrix.incell import plugins

MATRIX = """
name = "decode"
backends = ["torch", "torch-compile", "triton", "flashinfer"]
[run]
timeout_s = 300
max_rounds = 10
[[device]]
id = "cpu"
vendor = "cpu"
arch = "auto"
[[toolchain]]
name = "host"
system = true
[[kernel]]
name = "decode_attention"
workloads = { cpu = ["b2_h4_kv2_len129_d64"] }
dtypes = { cpu = ["float32"] }
"""


@pytest.mark.integration  # a real cell: torch and torch.compile built, checked and timed on this CPU
def test_decode_attention_runs_on_the_cpu_and_the_gpu_library_says_why_not(tmp_path, capsys):
    (tmp_path / "m.toml").write_text(MATRIX)
    code = cli.main(["run", str(tmp_path / "m.toml"), "--no-ray", "--reports", str(tmp_path / "reports"),
                     "--run-id", "decode"])
    err = capsys.readouterr().err
    assert code == 0, err
    rows = {r["backend"]: r for r in map(json.loads, (tmp_path / "reports" / "decode" / "results.jsonl")
                                         .read_text().splitlines())}
    for backend in ("torch", "torch-compile"):
        r = rows[backend]
        assert r["status"] == "ok", (backend, r["error"])
        assert r["rel_err"] < 1e-4 and r["bad_elements"] == 0 and r["rounds"] >= 10, r
        assert r["shape"] == "batch=2 heads=4 kv_heads=2 kv_len=129 head_dim=64"
    triton = rows["triton"]
    assert triton["status"] == "ok" and triton["timer"] == "correctness-only", (triton["status"], triton["error"])
    assert triton["rel_err"] < 1e-4 and triton["bad_elements"] == 0, triton
    flashinfer = rows["flashinfer"]
    assert flashinfer["status"] in ("not_installed", "unsupported"), flashinfer
    assert "\n" not in flashinfer["error"].strip() and flashinfer["error"], flashinfer["error"]


@pytest.mark.integration  # Triton's compiler, for GPUs this host does not have
@pytest.mark.parametrize("device", [DeviceInfo("h200", "nvidia", "sm_90", "H200"),
                                    DeviceInfo("mi300x", "amd", "gfx942", "MI300X")], ids=lambda d: d.arch)
def test_the_triton_decode_kernel_builds_for_gpus_no_host_has(device):
    impl = plugins.load_impl(paths.BUILTIN_KERNELS, "decode_attention", "triton")
    workloads = plugins.load_spec(paths.BUILTIN_KERNELS, "decode_attention").WORKLOADS
    for name in ("llama8b_b1_kv8192", "llama8b_b16_kv2048"):
        built = impl.compile_for(workloads[name], "bfloat16", device, "default")
        assert built.status == "compiles" and built.what.startswith(device.arch), built
