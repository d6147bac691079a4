"""From stored rows to decisions: paired statistics per row (stats), verdicts per (kernel, device, toolchain)
(verdicts), the supported-deployments table (deployments). Reads records only; scipy does the statistics."""
