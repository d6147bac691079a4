"""What opmatrix.kit.amdgcn reads from an AMD build without building one: clang's resource report for a kernel
(registers, LDS, spills, occupancy) and the row text made of it, and the ISA version of each gfx arch that picks its
device libraries. The builds themselves, by the distribution's clang on this CPU host:
tests/cells/test_compile_only_amd.py."""
from opmatrix.kit import amdgcn

# clang 22's -Rpass-analysis=kernel-resource-usage remarks for one kernel (its gfx942 gemm_relu build)
REMARKS = """\
kernel.cpp:10:1: remark: Function Name: gemm_relu_kernel [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     TotalSGPRs: 80 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     VGPRs: 245 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     AGPRs: 0 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     Dynamic Stack: False [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     Occupancy [waves/SIMD]: 2 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     VGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]
kernel.cpp:10:1: remark:     LDS Size [bytes/block]: 0 [-Rpass-analysis=kernel-resource-usage]
"""


def test_the_resource_report_and_the_row_text():
    facts = amdgcn.resources(REMARKS)
    assert facts == {"sgprs": 80, "vgprs": 245, "agprs": 0, "scratch_bytes": 0, "occupancy": 2, "sgpr_spills": 0,
                     "vgpr_spills": 3, "lds_bytes": 0}
    facts.update(mfma=128, lds_bytes=67584, lds_limit_bytes=65536)
    assert amdgcn.text(facts) == (" using MFMA (128 v_mfma), 245 VGPRs, 0 AGPRs, 80 SGPRs, 67584 bytes of LDS (over "
                                  "the 65536 a workgroup may have: it would not launch), 3 VGPRs spilled, occupancy "
                                  "2 waves/SIMD")
    # a kernel whose calls were left unresolved reports expressions, not numbers: those fields are left out
    assert amdgcn.resources("k.cpp:1:1: remark:     VGPRs: k.num_vgpr [-Rpass-analysis=kernel-resource-usage]") == {}


def test_the_isa_version_the_device_libraries_read():
    assert [amdgcn.isa_version(arch) for arch in ("gfx90a", "gfx942", "gfx950", "gfx908")] == [9010, 9402, 9500, 9008]
