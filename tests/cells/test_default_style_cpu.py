"""The default matrix's shape on this CPU through a real nox cell environment: every kernel and backend, each
backend's answer (ok, correctness-only, unsupported with the reason). Its fleet devices, compile-only:
test_compile_only_cells.py. Apart from test_nox_cells.py so that `--dist loadfile` runs the two side by side.
The variants no test reads are left out of the matrix (tests/helpers.DEFAULT_STYLE's excludes, each with its reason),
and its rounds stop at 10 (no assertion reads a speed).

torch.compile's cold build is the same for every job: on the CPU, inductor precompiles the header of its C++
kernels into $TMPDIR/torchinductor_<user>/precompiled_headers, whatever TORCHINDUCTOR_CACHE_DIR says, a machine-wide
file the machine's first job would build inside its timing. The adapter gives each job a temp folder of its own
(backends/torch_compile.py environment()) and links the host's kept header into it before the build
(opmatrix.kit.inductor_header); the run's torch-compile job, forked from the cell's fork server (which imported
torch before the job's environment was set), must find its header in its own cache folder, the host's one (not one
it built), and none of inductor's vector-ISA test programs (kept per host: opmatrix.kit.inductor_isa)."""
import pandas as pd
import pytest

from opmatrix.incell import host_cache
from opmatrix.kit import inductor_header
from tests.helpers import run_default_style

pytestmark = pytest.mark.integration


def test_default_style_matrix_runs_every_backend_on_cpu(tmp_path):
    """The default matrix's kernels and backends on this CPU: each backend's answer (ok, correctness-only,
    unsupported with the reason). Its fleet devices, compile-only: test_compile_only_cells.py."""
    run_dir, full = run_default_style(tmp_path, ["cpu"], keep_scratch=True)
    norm = {(r.device, r.backend, r.variant): r for r in full[full.kernel == "rmsnorm"].itertuples()}
    assert norm[("cpu", "torch", "default")].status == "ok" and norm[("cpu", "torch", "default")].rel_err < 1e-5
    triton_norm = norm[("cpu", "triton", "default")]
    assert triton_norm.status == "ok" and triton_norm.timer == "correctness-only"
    assert norm[("cpu", "triton", "l2_prefetch")].status == "unsupported"  # a Hopper instruction
    assert "cp.async.bulk" in norm[("cpu", "triton", "l2_prefetch")].error
    assert norm[("cpu", "tilelang", "default")].status == "unsupported"  # a gap: the CPU needs its own implementation
    attn = {(r.device, r.backend, r.variant): r for r in full[full.kernel == "flash_attention"].itertuples()}
    assert attn[("cpu", "torch", "math")].status == "ok" and attn[("cpu", "torch", "math")].rel_err < 1e-5
    assert attn[("cpu", "torch", "cudnn")].status == "unsupported"  # each SDPA backend is its own row
    assert attn[("cpu", "triton", "default")].status == "ok" and attn[("cpu", "triton", "default")].rel_err < 1e-5
    assert attn[("cpu", "tilelang", "fixed")].status == "unsupported"
    df = full[full.kernel == "gemm_relu"]
    got = {(r.device, r.backend, r.variant): r for r in df.itertuples()}
    for backend in ("torch", "torch-compile"):
        r = got[("cpu", backend, "default")]
        assert r.status == "ok" and r.median_ms > 0 and r.rel_err < 1e-5, r.error
    assert got[("cpu", "tilelang", "cpu")].status == "ok"
    assert got[("cpu", "tilelang", "tile")].status == "unsupported"
    assert got[("cpu", "tilelang", "tuned")].status == "unsupported"
    assert "needs the separate 'cpu' implementation" in got[("cpu", "tilelang", "tile")].error
    triton = got[("cpu", "triton", "default")]
    assert triton.status == "ok" and triton.timer == "correctness-only" and pd.isna(triton.median_ms)
    assert got[("cpu", "torch", "default")].speedup_vs_framework == 1.0
    # [run] builds left at its default: torch.compile's builds vary (BUILDS_VARY), so it is built twice and the
    # second build's rounds are in its row; eager torch's contestants are built once
    compiled, tilelang_cpu = got[("cpu", "torch-compile", "default")], got[("cpu", "tilelang", "cpu")]
    assert len(compiled.build_round_ms) == len(compiled.round_ms) > 0 and len(tilelang_cpu.build_round_ms) == 0
    # every timed row records the other processes' load in each of its rounds (Linux) and its worker's CPU between
    # its bursts
    assert len(compiled.round_others_cores) == len(compiled.round_ms) and compiled.idle_cpu_s >= 0
    assert got[("cpu", "cutlass", "default")].status == "unsupported"  # NVIDIA-only: the CPU needs another one
    report = (run_dir / "report.md").read_text()
    for section in ("## Coverage", "## Correctness", "## Performance", "## Not run, unsupported or failed"):
        assert section in report
    jobs = tmp_path / "scratch" / "default-style" / "cpu.host" / "jobs"  # torch-compile's cold build, above
    headers = list(jobs.glob("*torch-compile*/cache/tmp/torchinductor_*/precompiled_headers/*.gch"))
    assert headers, sorted(p.name for p in jobs.iterdir())
    kept = {p.stat().st_ino for p in host_cache.folder(inductor_header.FOLDER).rglob("*.gch")}
    assert {p.stat().st_ino for p in headers} <= kept, (headers, kept)  # the host's header, linked, none built
    # inductor's probe of the CPU's vector ISAs ran before the build, its test programs kept per host
    # (opmatrix.kit.inductor_isa): the job's cold folder holds the kernel's build only
    probes = [p for p in jobs.glob("*torch-compile*/cache/inductor/**/*.cpp") if "__avx_chk_kernel" in p.read_text()]
    assert not probes, probes
