"""torch.compile with the inductor backend: generated Triton (GPU) or C++/OpenMP (CPU) code around library calls."""
import importlib.util
import shutil

from opmatrix.kit import Unavailable, inductor_header, inductor_isa, require

COMPILES_ON_FIRST_CALL = True  # dynamo traces and inductor compiles at the first call
BUILDS_VARY = True  # generated code and its autotuned choices may differ from one build (process) to the next


def available() -> str:
    torch = require("torch")
    if not hasattr(torch, "compile"):
        raise Unavailable(f"torch {torch.__version__} has no torch.compile")
    return torch.__version__


def covers(device) -> str | None:
    import torch

    if device.vendor == "cpu":
        if not (shutil.which("g++") or shutil.which("c++")):
            return "inductor on CPU needs a C++ compiler (g++)"
        # before the build, kept per host (not the job's cold build): the host's vector ISAs, whose test programs
        # inductor compiles, and torch's precompiled C++ header, linked into the job's folder
        inductor_isa.detect()
        inductor_header.prepare()
        return None
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no GPU on this host"
    if importlib.util.find_spec("triton") is None:
        return "inductor on GPU generates Triton kernels, and triton is not installed"
    return None


def environment(device, cache_dir) -> dict:
    # Cold compile time: an empty cache folder of the job's own for inductor and the Triton it drives, and a temp
    # folder of its own: inductor keeps the headers it precompiles for CPU kernels under
    # $TMPDIR/torchinductor_<user>/precompiled_headers whatever TORCHINDUCTOR_CACHE_DIR says, a machine-wide file
    # that the machine's first job would build inside its timing. The host's kept header is linked in there before
    # the build instead (kit.inductor_header), so every job's build is the same.
    tmp = cache_dir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "inductor"), "TRITON_CACHE_DIR": str(cache_dir / "triton"),
            "TMPDIR": str(tmp)}
