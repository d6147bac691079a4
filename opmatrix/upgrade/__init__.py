"""Upgrade risk: toolchain and run comparisons, the nightly history with its change points and known-good ranges,
and the supported-deployments table built from stored verdicts and that history."""
