"""Workloads a matrix defines by their parameters, beside the ones a kernel's spec names.

A spec names its workloads (`WORKLOADS = {"small_1024": {"tokens": 256, "hidden": 1024}, ...}`); a matrix file may
add its own, with the same parameters, in `[workload.<kernel>.<name>]` tables:

    workloads_from = "../reports/llama-prof/workloads.toml"    # relative to the matrix file; or a list of files

    [workload.rmsnorm.decode_4k]                               # or in the matrix file itself
    tokens = 4
    hidden = 4096

A [[kernel]] then names them in its `workloads` like the spec's own. A workloads file (a fragment) holds only such
tables; `opmatrix profile` writes one per run, with the shapes the model called each kernel with
(opmatrix.profile.workloads). Here:
- `include(data, path)`: the fragments read and checked, merged into the matrix's `workload` table (before the
  matrix is validated), and where each workload came from;
- `problem(spec, params)`: what is wrong with a defined workload for its kernel's spec (the names check,
  `opmatrix.catalog`, asks it): the parameters the spec's own workloads take, of the types they give them, sizes at
  least 1, and whatever the spec's optional `check_workload(workload)` refuses.
A job of a defined workload carries its parameters to the cell (`JobSpec.params`); a spec's is looked up by name.
"""
from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

from opmatrix.matrix_checks import IDENT, NO_VALUE, Problem

FROM, TABLE = "workloads_from", "workload"  # the matrix keys
PARAM = r"^[A-Za-z_][A-Za-z0-9_]*$"  # a parameter name: tokens, head_dim, M
VALUES = (int, float, bool, str)  # what a parameter may be (a TOML date, array or table is none of them)
MAX_FILE_BYTES = 1 << 20
EXAMPLE = "[workload.rmsnorm.mine] with tokens = 64 and hidden = 64"


class FragmentError(Exception):
    """A workloads file (or the matrix's own workload tables) is missing or wrong: `opmatrix.matrix` turns it into
    its MatrixError, naming `source` and listing `problems`."""

    def __init__(self, source: Path, problems: list[Problem], what: str = "the matrix file"):
        super().__init__(source)
        self.source, self.problems, self.what = source, problems, what


def include(data: dict, path: Path) -> dict[tuple[str, str], str]:
    """Check the matrix's own [workload] tables, read and check the files `workloads_from` names, and merge their
    tables into data["workload"]. Returns {(kernel, name): where it is defined}: the file as `workloads_from`
    names it, or the matrix file's name. A `workloads_from` that is not a path or a list of paths is left for the
    schema to refuse."""
    own = data.get(TABLE, {})
    problems = tables_problems(own)
    if problems:
        raise FragmentError(path, problems)
    origins = {(kernel, name): path.name for kernel, names in own.items() for name in names}
    merged = {kernel: dict(names) for kernel, names in own.items()}
    given = data.get(FROM, [])
    files = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    for i, text in enumerate(files):
        if not isinstance(text, str):
            continue
        key = FROM if isinstance(given, str) else f"{FROM}[{i}]"
        file = fragment_path(path, text)
        tables = _read(file, key, text, path)
        for kernel, names in tables.items():
            for name, params in names.items():
                before = merged.setdefault(kernel, {}).get(name)
                if before is not None and before != params:
                    raise FragmentError(path, [Problem(key, text, f"defines workload.{kernel}.{name} as "
                                                       f"{_params(params)}, but {origins[(kernel, name)]} defines it "
                                                       f"as {_params(before)}; rename one of them")])
                merged[kernel][name] = params
                origins.setdefault((kernel, name), text)
    data[TABLE] = merged
    return origins


def fragment_path(matrix: Path, text: str) -> Path:
    """A `workloads_from` path as the matrix file names it, resolved against the matrix file's folder."""
    return (Path(matrix).resolve().parent / Path(text).expanduser()).resolve()


def _read(file: Path, key: str, text: str, matrix: Path) -> dict:
    """A workloads file's [workload] tables, checked; FragmentError naming the matrix key or the file's own."""
    def refuse(message: str) -> FragmentError:
        return FragmentError(matrix, [Problem(key, text, message)])

    if not file.exists():
        raise refuse(f"no such file ({file}); a path relative to the matrix file's folder ({matrix.resolve().parent}) "
                     "to a workloads file, such as the reports/<run-id>/workloads.toml `opmatrix profile` writes")
    if not file.is_file():
        raise refuse(f"{file} is not a file; name a workloads file such as reports/<run-id>/workloads.toml")
    try:
        raw = file.read_bytes()[:MAX_FILE_BYTES + 1]
        if len(raw) > MAX_FILE_BYTES:
            raise refuse(f"{file} is larger than {MAX_FILE_BYTES} bytes; a workloads file is a few KB of TOML")
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise refuse(f"cannot read {file}: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise refuse(f"{file} is not valid TOML ({exc}); a workloads file holds [workload.<kernel>.<name>] "
                     "tables") from None
    problems = [Problem(k, NO_VALUE, f"unknown key; a workloads file holds only [{TABLE}.<kernel>.<name>] tables "
                        f"(e.g. {EXAMPLE})") for k in data if k != TABLE]
    problems += tables_problems(data.get(TABLE, {}))
    if problems:
        raise FragmentError(file, problems, f"the workloads file ({key} of {matrix})")
    return data.get(TABLE, {})


def tables_problems(value: object) -> list[Problem]:
    """What is wrong with a [workload] table's layout: kernels, then workload names, then parameters."""
    if not isinstance(value, dict):
        return [Problem(TABLE, NO_VALUE, f"a table of kernels: [{TABLE}.<kernel>.<name>] tables ({EXAMPLE})")]
    out = []
    for kernel, names in value.items():
        key = f"{TABLE}.{kernel}"
        if not re.match(IDENT, kernel):
            out.append(Problem(key, NO_VALUE, "not a kernel name (lower case letters, digits, _ . -)"))
        elif not isinstance(names, dict) or not names:
            out.append(Problem(key, NO_VALUE, f"a table of workloads, [{key}.<name>], each with its parameters"))
        else:
            out += [p for name, params in names.items() for p in _workload_problems(f"{key}.{name}", name, params)]
    return out


def _workload_problems(key: str, name: str, params: object) -> list[Problem]:
    if not re.match(IDENT, name):
        return [Problem(key, NO_VALUE, "not a workload name: lower case letters, digits, _ . - (a [[kernel]]'s "
                        "workloads name it)")]
    if not isinstance(params, dict) or not params:
        return [Problem(key, NO_VALUE, f"a table of the workload's parameters ({EXAMPLE})")]
    out = []
    for param, v in params.items():
        if not re.match(PARAM, param):
            out.append(Problem(f"{key}.{param}", NO_VALUE, "not a parameter name (letters, digits, _)"))
        elif type(v) not in VALUES or (isinstance(v, float) and not math.isfinite(v)):
            out.append(Problem(f"{key}.{param}", v if type(v) in VALUES else NO_VALUE,
                               "a parameter is an integer, a finite number, true / false or a string"))
    return out


def problem(spec, params: dict) -> str | None:
    """Why `params` cannot be a workload of this kernel spec (a loaded spec.py), or None."""
    shapes = [w for w in spec.WORKLOADS.values() if isinstance(w, dict)]
    if not any(set(w) == set(params) for w in shapes):
        takes = " | ".join(dict.fromkeys(", ".join(w) for w in shapes))
        known = {k for w in shapes for k in w}
        missing = [k for k in shapes[0] if k not in params] if len(shapes) and all(
            set(w) == set(shapes[0]) for w in shapes) else []
        extra = [k for k in params if k not in known]
        detail = "".join(f"; {what}: {', '.join(keys)}" for what, keys in (("missing", missing), ("unknown", extra))
                         if keys)
        return f"its workloads take the parameters {takes}{detail}"
    for key, value in params.items():
        given = [w[key] for w in shapes if key in w]
        kinds = {type(v) for v in given}
        if type(value) not in kinds:
            return (f"{key} = {value!r}: a {type(value).__name__}, where its workloads give "
                    f"{' or '.join(sorted(k.__name__ for k in kinds))}")
        if type(value) is int and value < 1 <= min(given):
            return f"{key} = {value}: a size, at least 1"
    check = getattr(spec, "check_workload", None)
    if check is not None:
        try:
            check(dict(params))
        except ValueError as exc:
            return str(exc)
    return None


def _params(params: dict) -> str:
    return " ".join(f"{k}={v!r}" for k, v in params.items())
