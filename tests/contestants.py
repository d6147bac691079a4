"""Helpers of issue 31's contestant tests (test_contestants_kit.py, test_contestants_cells.py,
test_contestants_cpu_cells.py, test_contestants_flash_attention.py, in tests/unit and tests/cells): the devices they
build for, the shipped flash attention's implementations and workloads, and one matrix run on this CPU host whose
toolchain layers a contestant's packages over this interpreter (a real nox cell environment), its rows by (kernel,
backend, device, variant)."""
import pandas as pd

from opmatrix import paths
from opmatrix.core.jobs import DeviceInfo
from opmatrix.incell import plugins
from opmatrix.run import run
from opmatrix.scheduling.local import LocalScheduler

H200 = DeviceInfo("h200", "nvidia", "sm_90", "H200")
B200 = DeviceInfo("b200", "nvidia", "sm_100", "B200")
A100 = DeviceInfo("a100", "nvidia", "sm_80", "A100")
MI300X = DeviceInfo("mi300x", "amd", "gfx942", "MI300X")
CPU = DeviceInfo("cpu", "cpu", "x86_64", "CPU")

FLASH_WORKLOADS = plugins.load_spec(paths.BUILTIN_KERNELS, "flash_attention").WORKLOADS


def flash_attention(backend: str):
    """The shipped flash attention's implementation for `backend` (kernels/flash_attention/<backend>.py)."""
    return plugins.load_impl(paths.BUILTIN_KERNELS, "flash_attention", backend)

# the devices a run_layered matrix may name
DEVICES = {
    "cpu": '[[device]]\nid = "cpu"\nvendor = "cpu"\narch = "auto"\n',
    "h200": '[[device]]\nid = "h200"\nvendor = "nvidia"\narch = "sm_90"\nname = "H200"\n',
    "b200": '[[device]]\nid = "b200"\nvendor = "nvidia"\narch = "sm_100"\nname = "B200"\n',
}


def run_layered(tmp_path, name: str, devices: list[str], packages: list[str], kernels: dict,
                extra: str = "") -> pd.DataFrame:
    """One matrix: `devices`, one toolchain layering `packages` over this interpreter, `kernels` as
    {kernel: (backends, {vendor: workload}, {vendor: dtype})}, then `extra` TOML (excludes); its rows."""
    text = [f'name = "{name}"\nbackends = {sorted({b for k in kernels.values() for b in k[0]})!r}\n'
            "[run]\ntimeout_s = 300\n", *(DEVICES[d] for d in devices),
            f'[[toolchain]]\nname = "layered"\nsystem = true\npackages = {packages!r}\n']
    for kernel, (backends, workloads, dtypes) in kernels.items():
        text.append(f'[[kernel]]\nname = "{kernel}"\nbackends = {backends!r}\n'
                    f"workloads = {{ {', '.join(f'{v} = [{w!r}]' for v, w in workloads.items())} }}\n"
                    f"dtypes = {{ {', '.join(f'{v} = [{d!r}]' for v, d in dtypes.items())} }}\n".replace("'", '"'))
    matrix = tmp_path / f"{name}.toml"
    matrix.write_text("\n".join(text) + extra)
    run_dir = run(matrix, reports_dir=tmp_path / "reports", run_id=name, scratch_root=tmp_path / "scratch",
                  scheduler=LocalScheduler())
    return pd.read_parquet(run_dir / "results.parquet")


def by_key(df) -> dict:
    return {(r.kernel, r.backend, r.device, r.variant): r for r in df.itertuples()}
