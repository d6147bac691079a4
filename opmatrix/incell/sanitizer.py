"""What compute-sanitizer printed, as a row keeps it: how many errors (memcheck, initcheck) or hazards (racecheck) a
tool reported, and the first one in one line (opmatrix.incell.gpu_tools runs the tools; tests/data/gpu_tools_h100/
holds their output recorded on an H100).

Every line of the tool's own starts with `========= `. A finding is a line at the left margin ("Invalid __global__
read of size 4 bytes", "Uninitialized __global__ memory read of size 16 bytes", "Error: Race reported between ...")
followed by indented lines (where: "at past_the_end+0xb0 in oob.py:6", "by thread (32,0,0) in block (1020,0,0)",
"Address 0x...", and the host backtrace, which is left out). The tool ends with its count:
`ERROR SUMMARY: 512 errors` (memcheck, initcheck), `RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)`
(racecheck). A run without that line did not finish (the program crashed first, or the time limit ended it): its
count is unknown. Stdlib only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PREFIX = "========="
TOOLS = ("memcheck", "racecheck", "initcheck")
_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_HAZARDS = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
# the tool's own lines that are no finding
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "Target application returned",
                 "Error: No attachable process", "LEAK SUMMARY")
_BACKTRACE = ("Saved host backtrace", "Host Frame", "Device Frame")


@dataclass
class Outcome:
    """One tool's run: its findings (count: errors, or racecheck's error hazards; None when it did not finish),
    its warnings (racecheck), the first finding in one line."""

    tool: str
    count: int | None
    warnings: int = 0
    first: str = ""
    findings: list[str] = field(default_factory=list)  # each finding's line, in the order printed (as printed)

    @property
    def finished(self) -> bool:
        return self.count is not None

    @property
    def found(self) -> bool:
        return bool(self.count)

    def said(self) -> str:
        """'memcheck 0 errors', 'racecheck 0 hazards', 'initcheck 512 errors'; 'memcheck did not finish'."""
        if self.count is None:
            return f"{self.tool} did not finish"
        if self.tool == "racecheck":
            return f"racecheck {self.count} hazard{'s' if self.count != 1 else ''}" + (
                f" ({self.warnings} warnings)" if self.warnings else "")
        return f"{self.tool} {self.count} error{'s' if self.count != 1 else ''}"


def _strip(line: str) -> str | None:
    """A line of the tool's own without its prefix (indentation kept); None for the program's own lines."""
    if not line.startswith(PREFIX):
        return None
    return line[len(PREFIX):].removeprefix(" ")


def parse(text: str, tool: str) -> Outcome:
    """The outcome of `tool` from its output (the program's own lines mixed in are skipped)."""
    lines = [s for s in map(_strip, text.splitlines()) if s is not None]
    count, warnings = None, 0
    for line in lines:
        if count is None and (m := _ERRORS.search(line)):
            count = int(m.group(1))
        if m := _HAZARDS.search(line):
            count, warnings = int(m.group(2)), int(m.group(3))
    findings: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        indented = line[:1].isspace()
        if not indented:
            if line.startswith(_NOT_FINDINGS) or _ERRORS.search(line):
                findings.append([])  # ends the block before it
                continue
            findings.append([line.strip()])
        elif findings and findings[-1] and not line.strip().startswith(_BACKTRACE):
            findings[-1].append(line.strip())
    blocks = [b for b in findings if b]
    # a margin line without a where (a note of the tool's) is a finding only where the tool counted some
    real = [b for b in blocks if len(b) > 1] or (blocks if count else [])
    texts = [" ".join(b) for b in real]
    return Outcome(tool, count, warnings, texts[0][:400] if texts else "", texts)
