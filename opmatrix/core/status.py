"""The fixed status vocabulary of a result row.

Every (cell, kernel, workload, dtype, backend, variant) ends with exactly one of these. Reports, comparisons and
verdicts branch on them, so the set is closed: a new status is added here and nowhere else.
"""

OK = "ok"  # ran, matched the fp64 reference, timed (or correctness-only where the backend says so)
UNSUPPORTED = "unsupported"  # the backend or implementation does not cover this device/dtype (reason given)
NOT_INSTALLED = "not_installed"  # the backend's package is not importable in the cell's environment
COMPILE_ERROR = "compile_error"  # building the kernel raised
RUNTIME_ERROR = "runtime_error"  # running the built kernel raised
MISMATCH = "mismatch"  # ran, but the output differs from the reference beyond the tolerance (or NaN)
TIMEOUT = "timeout"  # the worker process exceeded its time limit and was killed
OOM = "oom"  # the device ran out of memory (building or running the kernel asked for more than it has)
CRASHED = "crashed"  # the worker process died (signal, abort, exit without a result)
NO_HOST = "no_host"  # no host of this run offers the cell's device
ENV_ERROR = "env_error"  # the cell's environment could not be built or its runner failed to start
LOST = "lost"  # the host running the cell went away and no other host with the device could take it
COMPILES = "compiles"  # no host has the device: a binary for it was built elsewhere, never run
LOWERS = "lowers"  # no host has the device: device source was generated for it, no binary (no toolchain here)
SUSPECT = "suspect"  # correct, but its timing cannot be real: a rate beyond the roofline bound, or its checked calls
# took far longer than its timed ones (work skipped while timed); never eligible for a verdict
UNSAFE = "unsafe"  # correct and timed, but compute-sanitizer ([run] sanitize) found an out-of-bounds access, a read of
# memory never written or a shared-memory race in one of its calls; never adopted, never a supported deployment

# the phase of a row whose kernel spec failed (the judge's, never the contestant's or the device's fault): its
# verdict is `not judged` (opmatrix.decide.verdicts)
SPEC_PHASE = "spec"

ALL = (OK, UNSUPPORTED, NOT_INSTALLED, COMPILE_ERROR, RUNTIME_ERROR, MISMATCH, TIMEOUT, OOM, CRASHED, NO_HOST,
       ENV_ERROR, LOST, COMPILES, LOWERS, SUSPECT, UNSAFE)

# Statuses that mean "this backend does not run here" (coverage), as opposed to "it runs but is broken".
NOT_COVERED = (UNSUPPORTED, NOT_INSTALLED, NO_HOST)
BUILD_ONLY = (COMPILES, LOWERS)  # "does it even build for that device?" answered without the device
FAILED = (COMPILE_ERROR, RUNTIME_ERROR, MISMATCH, TIMEOUT, OOM, CRASHED, ENV_ERROR, LOST, SUSPECT, UNSAFE)
CORRECTNESS_ONLY = "correctness-only"  # the timer of a row whose timings would mean nothing here (an interpreter): never timed
