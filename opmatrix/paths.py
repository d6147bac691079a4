"""Where the project's folders are. The engine is used from a checkout: kernels/ and backends/ sit beside it."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
BACKENDS = ROOT / "backends"
MATRICES = ROOT / "matrix"
REPORTS = ROOT / "reports"
DEFAULT_MATRIX = MATRICES / "default.toml"
NOXFILE = ROOT / "noxfile.py"
SCRATCH = ROOT / ".opmatrix"  # per-run scratch: isolated compiler caches, job files (git-ignored)
