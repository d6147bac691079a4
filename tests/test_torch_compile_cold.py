"""torch.compile's cold build is cold: on the CPU, inductor precompiles the headers of its C++ kernels into
$TMPDIR/torchinductor_<user>/precompiled_headers, whatever TORCHINDUCTOR_CACHE_DIR says, so a machine-wide file
made every job after the machine's first one faster than a first build. The adapter gives each job a temp folder of
its own (backends/torch_compile.py environment()); here a real CPU job, through a worker started as the cell runner
starts it (forked from the cell's fork server, which imported torch before the job's environment was set), leaves
its precompiled header in its own cache folder."""
import shutil

import pytest

from opmatrix.core import status
from opmatrix.incell.forkserver import ForkServer
from tests.helpers import copy_plugins, worker_process_row

pytestmark = pytest.mark.integration


def test_a_cold_cpu_build_precompiles_its_headers_in_its_own_cache_folder(tmp_path):
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("inductor on the CPU needs a C++ compiler")
    copy_plugins(tmp_path, "gemm_relu", ["spec.py", "torch_compile.py"], ["torch_compile"])
    forks = ForkServer.start(str(tmp_path), tmp_path / "forkserver.log")  # None with OPMATRIX_FORKSERVER=0
    try:
        row = worker_process_row(tmp_path, "torch-compile", "gemm_relu", "tiny_ragged", "float32", forks)
    finally:
        if forks is not None:
            forks.close()
    assert row is not None and row.status == status.OK, row
    headers = list(tmp_path.glob("jobs/*/cache/tmp/torchinductor_*/precompiled_headers/*.gch"))
    assert headers and headers[0].stat().st_size > 0, sorted(p.name for p in tmp_path.rglob("cache/*"))[:20]
