"""Upgrade risk: toolchain and run comparisons, and the nightly history with its change points."""
