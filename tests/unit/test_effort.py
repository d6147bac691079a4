"""The files an implementation's lines of code and source digest are taken over (issue 45): a backend's own
kernels/<op>/<backend>.py and the sources named after it, never another backend's implementation that shares a
prefix of its name (`torch` and torch_compile.py)."""
from opmatrix.decide import effort
from opmatrix.incell.plugins import implementation_files


def _folder(tmp_path):
    folder = tmp_path / "kernels" / "op"
    folder.mkdir(parents=True)
    files = {"spec.py": "WORKLOADS = {'a': {}}\n", "torch.py": "import torch\nX = 1\n",
             "torch_compile.py": "import torch\nA = 1\nB = 2\nC = 3\n", "torch_compile_helper.cu": "int f();\n",
             "cutlass.py": "X = 1\n", "cutlass_gemm_relu.cu": "// a comment\nint g();\nint h();\n"}
    for name, text in files.items():
        (folder / name).write_text(text)
    return tmp_path / "kernels"


def test_a_backend_takes_only_its_own_files_never_a_longer_named_backends(tmp_path):
    kernels = _folder(tmp_path)
    names = {b: [p.name for p in implementation_files(kernels, "op", b)] for b in ("torch", "torch-compile",
                                                                                     "cutlass")}
    assert names == {"torch": ["torch.py"], "torch-compile": ["torch_compile.py", "torch_compile_helper.cu"],
                     "cutlass": ["cutlass.py", "cutlass_gemm_relu.cu"]}
    assert effort.lines_of_code(kernels, "op", "torch") == 2
    assert effort.lines_of_code(kernels, "op", "cutlass") == 3


def test_editing_torch_compile_leaves_the_torch_digest_alone(tmp_path):
    kernels = _folder(tmp_path)
    before = effort.source_digest(kernels, "op", "torch")
    compiled = effort.source_digest(kernels, "op", "torch-compile")
    (kernels / "op" / "torch_compile.py").write_text("import torch\nA = 10\n")
    (kernels / "op" / "torch_compile_helper.cu").write_text("int f(int);\n")
    assert effort.source_digest(kernels, "op", "torch") == before
    assert effort.source_digest(kernels, "op", "torch-compile") != compiled
