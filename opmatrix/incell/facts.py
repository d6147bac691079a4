"""Environment facts recorded with every result: what device, driver, runtime and package versions a cell
actually ran with. Probed once per cell, in a process of the cell's own environment, by importing the packages
(so the version is the one imported, not the one a resolver promised). Stdlib only at import."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import shutil
import socket
import subprocess


def _imported_version(module: str) -> str:
    try:
        mod = __import__(module)
    except Exception as exc:  # not installed, or broken: both are facts worth keeping
        return "" if isinstance(exc, ImportError) else f"broken: {type(exc).__name__}"
    return str(getattr(mod, "__version__", "unknown"))


def _installed_version(module: str) -> str:
    """The version of the distribution this environment would import `module` from, without importing it
    (TileLang's import costs seconds per cell). The version each row's backend imported is its backend_version."""
    if importlib.util.find_spec(module) is None:
        return ""
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return _imported_version(module)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    return ""


def probe(vendor: str) -> dict:
    facts = {"host": socket.gethostname(), "python": platform.python_version(),
             "torch": _imported_version("torch"), "triton": _imported_version("triton"),
             "tilelang": _installed_version("tilelang"), "device_name": "", "arch": "", "driver": "",
             "runtime": ""}
    if vendor == "cpu":
        facts.update(device_name=_cpu_name(), arch=platform.machine(), runtime="cpu")
        return facts
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            facts["device_name"] = props.name
            if torch.version.hip:
                facts["arch"] = getattr(props, "gcnArchName", "").split(":")[0]
                facts["runtime"] = f"rocm {torch.version.hip}"
            else:
                facts["arch"] = f"sm_{props.major}{props.minor}"
                facts["runtime"] = f"cuda {torch.version.cuda}"
    except Exception as exc:
        facts["runtime"] = f"unavailable: {type(exc).__name__}"
    if vendor == "nvidia":
        facts["driver"] = _nvidia_driver()
    return facts
