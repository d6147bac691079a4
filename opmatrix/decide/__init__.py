"""From stored rows to decisions: paired statistics per row (stats), verdicts per (kernel, device, toolchain)
(verdicts). Reads records only; scipy does the statistics. The supported-deployments table, which also reads the
nightly history's known-good ranges, is opmatrix.upgrade.deployments."""
