"""opmatrix: a multi-backend deployment-matrix runner for AI kernels.

Stdlib-only at import: this package is also imported inside every cell environment.
"""

__version__ = "0.1.0"


def load_run(run, reports_dir=None):
    """One run's results as a pandas DataFrame (run id under reports/, or a run folder)."""
    from opmatrix import paths, store

    return store.load_run(run, reports_dir or paths.REPORTS)


def load_all(reports_dir=None):
    """Every run under reports/ as one pandas DataFrame."""
    from opmatrix import paths, store

    return store.load_all(reports_dir or paths.REPORTS)
