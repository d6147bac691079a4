"""The nox file of cell sessions: `opmatrix run` starts nox with this file and OPMATRIX_CELL_PLAN naming a cell
plan, and the plan's session is registered here (opmatrix.cellenv.nox_session). It ships inside the package, so an
installed opmatrix runs cells as a checkout does; the project's own noxfile.py holds the sessions people call."""
import os

from opmatrix.cellenv import nox_session

if os.environ.get("OPMATRIX_CELL_PLAN"):
    nox_session.register(os.environ["OPMATRIX_CELL_PLAN"])
