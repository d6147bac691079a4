"""When a verdict is not to be trusted as it stands, and why: what the cell measured of the machine while the
verdict's rows were timed. Each caveat names its rows' worst figure and the rule that raised it.

- a busy CPU: a row waited BUSY_PCT of its timed calls' time for a core other processes held (taken out of its
  times, but what is left is less sure), or other processes kept OTHERS_CORES cores busy in the median round;
- strayed rounds (opmatrix.core.straying): left out of the intervals and timed again (said, not a doubt), or so
  many in a row that they were kept (a doubt: the row's rounds are not one distribution);
- a GPU held below its clocks: the driver reported a power or thermal cap (telemetry.LIMITING) after a share of
  the rounds.
"""
from __future__ import annotations

import numpy as np

BUSY_PCT = 5.0  # rows that waited this share (%) of their timed calls for a core: the machine was busy
OTHERS_CORES = 0.5  # other processes kept this many cores busy in a row's median round: the machine was busy
CAPPED_SHARE = 0.2  # a GPU under a power or thermal cap after this share of a row's bursts
LIMITING = ("SwPowerCap", "HwSlowdown", "HwThermalSlowdown", "SwThermalSlowdown", "HwPowerBrakeSlowdown")

READ = ["waited_pct", "round_others_cores", "strayed_rounds", "stray_note", "round_clock_events", "label"]


def caveats(ran) -> list[str]:
    """The caveats of a verdict over these rows (a frame with READ's columns where present; '' columns absent)."""
    return [text for text in (_waited(ran), _others(ran), _strays(ran), _capped(ran)) if text]


def untrusted(texts: list[str]) -> bool:
    """Does any caveat put the verdict in doubt (rather than only say what was done)?"""
    return any(not t.startswith("rounds that strayed") for t in texts)


def _waited(ran) -> str:
    if "waited_pct" not in ran.columns or not ran.waited_pct.notna().any():
        return ""
    worst = float(ran.waited_pct.max())
    if worst < BUSY_PCT:
        return ""
    return (f"a busy machine: up to {worst:.0f} % of a row's timed calls went to other processes (taken out of "
            "its times; the A/A floor shows what is left of the noise): a quieter machine gives a surer verdict")


def _others(ran) -> str:
    if "round_others_cores" not in ran.columns:
        return ""
    medians = [float(np.median(v)) for v in ran.round_others_cores if v is not None and len(v)]
    if not medians or max(medians) < OTHERS_CORES:
        return ""
    return (f"a busy machine: other processes kept {max(medians):.2g} cores busy in a row's median round "
            f"(at least {OTHERS_CORES:g} is busy): the rows shared the machine with them")


def _strays(ran) -> str:
    if "stray_note" not in ran.columns:
        return ""
    notes = [(label, note) for label, note in zip(ran.label, ran.stray_note.fillna("")) if note]
    if not notes:
        return ""
    kept = [(label, note) for label, note in notes if "kept in the interval" in note]
    if kept:
        label, note = kept[0]
        return (f"rounds do not follow one distribution in {len(kept)} row(s): {label}: {note}")
    left = int(np.nansum(ran.strayed_rounds)) if "strayed_rounds" in ran.columns else len(notes)
    label, note = notes[0]
    return f"rounds that strayed were left out ({left} over {len(notes)} row(s)) and timed again; {label}: {note}"


def _capped(ran) -> str:
    if "round_clock_events" not in ran.columns:
        return ""
    worst, label = 0.0, ""
    for name, events in zip(ran.label, ran.round_clock_events):
        if events is None or not len(events):
            continue
        share = sum(any(r in e for r in LIMITING) for e in events) / len(events)
        if share > worst:
            worst, label = share, name
    if worst < CAPPED_SHARE:
        return ""
    return (f"the GPU was held below its clocks (a power or thermal cap) after {worst:.0%} of {label}'s bursts: "
            "a figure of a capped GPU")
