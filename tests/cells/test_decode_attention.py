"""The decode attention kernel (kernels/decode_attention: one token's grouped-query attention over its KV cache)
through a real run on this CPU: SDPA with enable_gqa and torch.compile of it are `ok` against the fp64 reference on
both input kinds and timed in rounds; FlashInfer, NVIDIA-only, says so in one line. Its GPU rows are owed to a
GPU run (matrix/h200-contestants.toml)."""
import json

import pytest

from opmatrix import cli

MATRIX = """
name = "decode"
backends = ["torch", "torch-compile", "flashinfer"]
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
    flashinfer = rows["flashinfer"]
    assert flashinfer["status"] in ("not_installed", "unsupported"), flashinfer
    assert "\n" not in flashinfer["error"].strip() and flashinfer["error"], flashinfer["error"]
