"""Issue 31's helpers, with nothing beyond the test environment: kit.cubin reads a real cubin's arch and resources
(a two-line Triton kernel compiled for sm_90 / sm_100a, no GPU needed), and kit.nvidia gives every NVIDIA-only
contestant the same refusals. The Gluon kernels built for sm_90 / sm_100 / gfx942: tests/cells/test_contestants_kit.py;
the contestants whose packages this environment lacks, in real nox cells: tests/cells/test_contestants_cells.py."""
import pytest

from opmatrix.incell.plugins import Unsupported
from opmatrix.kit import cubin, nvidia
from tests.contestants import A100, B200, CPU, H200, MI300X


def _triton_cubin(capability: int) -> bytes:
    """A real cubin: a two-line Triton kernel compiled for sm_<capability> (no GPU needed)."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def double(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    source = ASTSource(fn=double, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 128})
    return triton.compile(source, target=GPUTarget("cuda", capability, 32)).asm["cubin"]


def test_a_cubin_states_its_own_arch_and_resources_and_anything_else_is_refused():
    for capability, arch in ((90, "sm_90"), (100, "sm_100a")):
        binary = _triton_cubin(capability)
        assert cubin.sm(binary) == capability
        text, facts = cubin.describe(arch, binary)
        assert text.startswith(f"{arch} cubin") and text.endswith(f"({len(binary)} bytes)"), text
        assert facts["cubin_bytes"] == len(binary) > 0
        assert cubin.cuobjdump() and facts["registers"] > 0 and facts["local_bytes"] == 0, facts  # Triton's copy
    with pytest.raises(cubin.NotACubin, match="asked for sm_100, the cubin's ELF header says sm_90"):
        cubin.describe("sm_100", _triton_cubin(90))
    with pytest.raises(cubin.NotACubin, match="not a 64-bit ELF"):
        cubin.sm(b"\x7fELF" + bytes(10))


def test_nvidia_only_contestants_refuse_cpus_amd_gpus_and_archs_below_their_floor():
    assert nvidia.device_reason(H200, "quack", min_sm=90) is None
    assert "NVIDIA GPUs only" in nvidia.device_reason(CPU, "cuTile")
    assert "an AMD GPU (gfx942) needs a separate implementation" in nvidia.device_reason(MI300X, "cuTile")
    assert nvidia.device_reason(A100, "quack", min_sm=90) == "quack needs sm_90 or later; sm_80 is older"
    with pytest.raises(Unsupported, match="FlashAttention 4 needs sm_90"):
        nvidia.require(A100, "FlashAttention 4", min_sm=90)
    assert [nvidia.arch_label(d) for d in (H200, B200, A100)] == ["sm_90a", "sm_100a", "sm_80"]
