"""`opmatrix wheels MATRIX --out ARCHIVE`: what a GPU host without a package index needs for a matrix, made in one
command on a machine with one: every package its toolchains pin (and any `--with`), downloaded by pip as wheels
for the host's Python and platform, packed as one xz archive of unpacked wheels (opmatrix.wheelhouse), which
`python3 -m opmatrix.wheelhouse ARCHIVE FOLDER` turns back into wheels on the host.

Without `--deps` only the packages named (a GPU image has torch and its kind; a library's other needs pinned
beside it). With `--deps` their dependencies too, as pip resolves them for that host (`pip install --dry-run
--report`, metadata only), less what the host already has (`--host-has`, default torch and triton) and everything
only those need: liger-kernel asks for torch, whose CUDA libraries the image has, so none of them travels."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from opmatrix import paths
from opmatrix.commands.common import json_argument, matrix_argument, subcommand
from opmatrix.core.errors import UsageError

# The platform tags a glibc x86_64 host takes (pip download matches a --platform exactly, without the older tags a
# host accepts): manylinux wheels for glibc 2.39 (Ubuntu 24.04) down to 2.17 (manylinux2014).
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(39, 16, -1)] + ["manylinux2014_x86_64",
                                                                             "linux_x86_64"]
PIP_TAIL = 3000  # characters of pip's output a failed download shows
HOST_HAS = ["torch", "triton"]  # what a GPU host's image has (its CUDA libraries come with torch)


def add_parser(sub) -> None:
    w = subcommand(sub, "wheels", "download the wheels a matrix's toolchains pin, for a host without a package "
                   "index, as one xz archive of unpacked wheels (python3 -m opmatrix.wheelhouse unpacks it there)",
                   "  opmatrix wheels matrix/h200-contestants.toml --python 3.12 --with nox pydantic "
                   "--out .bundle/h200.tar.xz\n"
                   "  python3 -m opmatrix.wheelhouse .bundle/h200.tar.xz /tmp/wheels   # on the host", handle)
    matrix_argument(w)
    w.add_argument("--out", required=True, help="the archive to write (.tar.xz)")
    w.add_argument("--toolchain", action="append", default=[], metavar="NAME",
                   help="only this toolchain's packages (repeatable; default: every toolchain's)")
    w.add_argument("--with", dest="extra", nargs="*", default=[], metavar="REQUIREMENT",
                   help="more requirements to bring (the driver's own on a bare host: nox pydantic ...)")
    w.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                   help="the host's Python version (default: this one's)")
    w.add_argument("--platform", action="append", metavar="TAG", help="a wheel platform tag the host takes "
                   "(repeatable; default: glibc x86_64, manylinux_2_39 down to manylinux2014)")
    w.add_argument("--deps", action="store_true", help="their dependencies too, less what the host has "
                   "(--host-has) and what only that needs")
    w.add_argument("--host-has", nargs="*", default=HOST_HAS, metavar="NAME",
                   help=f"with --deps: packages the host has, left out with what only they need (default: "
                   f"{' '.join(HOST_HAS)})")
    w.add_argument("--max-mib", type=float, help="fail (exit 1, the archive kept) when the archive is larger: what "
                   "a transfer to the host may carry")
    json_argument(w)


def requirements(matrix, toolchains: list[str], extra: list[str]) -> tuple[list[str], list[str]]:
    """(the requirements to download, each once in order; the package indexes the chosen toolchains name)."""
    known = [t.name for t in matrix.toolchain]
    unknown = [name for name in toolchains if name not in known]
    if unknown:
        raise UsageError(f"--toolchain {', '.join(unknown)}: not a toolchain of {matrix.name}; its toolchains: "
                         f"{', '.join(known)}")
    chosen = [t for t in matrix.toolchain if not toolchains or t.name in toolchains]
    wanted = [str(p) for t in chosen for p in t.packages] + list(extra)
    indexes = [str(url) for t in chosen for url in t.index.values()]
    if not wanted:
        raise UsageError(f"nothing to bring: {'the chosen toolchains' if toolchains else matrix.name + ' toolchains'} "
                         "pin no packages; name some with --with")
    return list(dict.fromkeys(wanted)), list(dict.fromkeys(indexes))


def _pip(args: list[str], what: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise UsageError(f"pip could not {what}:\n{(done.stdout + done.stderr).strip()[-PIP_TAIL:]}")


def _for_host(python: str, platforms: list[str], indexes: list[str]) -> list[str]:
    """pip's arguments for wheels of the host's Python and platforms, from PyPI and the toolchains' indexes."""
    return ["--only-binary=:all:", "--python-version", python, *(a for tag in platforms for a in ("--platform", tag)),
            *(a for url in indexes for a in ("--extra-index-url", url))]


def resolve(wanted: list[str], indexes: list[str], python: str, platforms: list[str], host_has: list[str],
            scratch: Path) -> tuple[list[str], list[str]]:
    """(name==version of `wanted` and everything they need on that host, less `host_has` and what only they need;
    the names left out). pip resolves for the host's Python and platform without downloading a package."""
    report = scratch / "resolved.json"
    _pip(["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), "--target",
          str(scratch / "target"), *_for_host(python, platforms, indexes), *wanted],
         f"resolve {' '.join(wanted)} for Python {python}")
    installs = json.loads(report.read_text())["install"]
    resolved = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in installs}
    return closure(resolved, [canonicalize_name(Requirement(w).name) for w in wanted],
                   {canonicalize_name(n) for n in host_has}, python)


def closure(resolved: dict[str, dict], roots: list[str], host_has: set[str], python: str) -> tuple[list[str],
                                                                                                     list[str]]:
    """Walk pip's resolution (name -> its metadata: version, requires_dist) from `roots`, never into `host_has`
    (a root named there is kept: it was asked for), following each requirement whose marker holds on a Linux
    x86_64 host of that Python with no extra asked for."""
    environment = {"python_version": python, "python_full_version": python + ".0", "sys_platform": "linux",
                   "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                   "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    kept, stack = {}, [r for r in roots if r in resolved]
    while stack:
        name = stack.pop()
        if name in kept:
            continue
        kept[name] = f"{resolved[name]['name']}=={resolved[name]['version']}"
        for text in resolved[name].get("requires_dist") or []:
            need = Requirement(text)
            dep = canonicalize_name(need.name)
            if dep in resolved and dep not in host_has and (need.marker is None or need.marker.evaluate(environment)):
                stack.append(dep)
    return sorted(kept.values(), key=str.lower), sorted(set(resolved) - set(kept))


def download(wanted: list[str], indexes: list[str], python: str, platforms: list[str], dest: Path) -> list[Path]:
    """The wheels pip downloads for the host (binary only, no dependencies); UsageError with pip's words when it
    cannot (a version the index does not have for that Python and platform)."""
    _pip(["download", "--no-deps", "--dest", str(dest), *_for_host(python, platforms, indexes), *wanted],
         f"download {' '.join(wanted)} for Python {python} on {platforms[0]} or older")
    return sorted(dest.glob("*.whl"))


def handle(args) -> int:
    from opmatrix import wheelhouse
    from opmatrix.matrix import load_matrix

    matrix = load_matrix(paths.matrix_file(args.matrix))
    wanted, indexes = requirements(matrix, args.toolchain, args.extra)
    out = Path(args.out)
    if not out.name.endswith(".tar.xz"):
        raise UsageError(f"--out {out}: the archive is a .tar.xz")
    platforms = args.platform or PLATFORMS
    print(f"downloading {len(wanted)} requirement(s) for Python {args.python} on {platforms[0]} or older: "
          f"{' '.join(wanted)}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="opmatrix-wheels-") as tmp:
        if args.deps:
            wanted, left_out = resolve(wanted, indexes, args.python, platforms, args.host_has, Path(tmp))
            print(f"with their dependencies: {len(wanted)} package(s); left to the host: "
                  f"{', '.join(left_out) or 'nothing'}", file=sys.stderr)
        wheels = download(wanted, indexes, args.python, platforms, Path(tmp) / "wheels")
        print(f"packing {len(wheels)} wheel(s) into {out}", file=sys.stderr)
        packed = wheelhouse.pack(wheels, out, Path(tmp) / "unpacked")
    mib = packed.archive_bytes / 2 ** 20
    over = args.max_mib is not None and mib > args.max_mib
    if args.json:
        print(json.dumps({"archive": str(out), "wheels": packed.wheels, "wheel_bytes": packed.wheel_bytes,
                          "unpacked_bytes": packed.unpacked_bytes, "archive_bytes": packed.archive_bytes,
                          "over_limit": over}, indent=1))
    else:
        for name in packed.wheels:
            print(name)
        print(f"{out}: {mib:.1f} MiB ({packed.wheel_bytes / 2 ** 20:.1f} MiB of wheels, "
              f"{packed.unpacked_bytes / 2 ** 20:.1f} MiB unpacked); on the host: python3 -m opmatrix.wheelhouse "
              f"{out} FOLDER, then pip install --no-index --find-links FOLDER ... or find_links = \"FOLDER\"")
    if over:
        print(f"opmatrix: {out} is {mib:.1f} MiB, over --max-mib {args.max_mib:g}", file=sys.stderr)
        return 1
    return 0
