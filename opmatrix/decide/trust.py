"""When a verdict is not to be trusted as it stands, and why: what the cell measured of the machine while the
verdict's rows were timed. Each caveat names its rows' worst figure and the rule that raised it.

- a busy CPU: a row waited BUSY_PCT of its timed calls' time for a core other processes held (taken out of its
  times, but what is left is less sure), or other processes kept OTHERS_CORES cores busy in the median round;
- strayed rounds (opmatrix.core.straying): left out of the intervals and timed again (said, not a doubt), or so
  many in a row that they were kept (a doubt: the row's rounds are not one distribution);
- a GPU slowed below its clocks by heat or a hardware brake (THROTTLED) after a share of a row's bursts. A power
  cap (SwPowerCap) is not a doubt: a GPU under full load runs at its power limit in production too, every
  contestant of a round meets it alike, and the report's measurement quality counts the rows it touched.
"""
from __future__ import annotations

import numpy as np

BUSY_PCT = 5.0  # rows that waited this share (%) of their timed calls for a core: the machine was busy
OTHERS_CORES = 0.5  # other processes kept this many cores busy in a row's median round: the machine was busy
THROTTLED_SHARE = 0.2  # a GPU slowed by heat or a hardware brake after this share of a row's bursts
THROTTLED = ("HwSlowdown", "HwThermalSlowdown", "SwThermalSlowdown", "HwPowerBrakeSlowdown")

READ = ["waited_pct", "round_others_cores", "strayed_rounds", "stray_note", "round_clock_events", "label"]


def caveats(ran) -> list[str]:
    """The caveats of a verdict over these rows (a frame with READ's columns where present; '' columns absent)."""
    return [text for text in (_waited(ran), _others(ran), _strays(ran), _capped(ran)) if text]


def said(texts: list[str]) -> list[str]:
    """The caveats that only say what was done (strayed rounds left out), not doubts."""
    return [t for t in texts if t.startswith(LEFT_OUT)]


def doubts(texts: list[str]) -> list[str]:
    """The caveats that put the verdict in doubt."""
    return [t for t in texts if not t.startswith(LEFT_OUT)]


LEFT_OUT = "rounds that strayed were left out of the intervals"



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
    return f"{LEFT_OUT} ({left} over {len(notes)} row(s)); {label}: {note}"


def _capped(ran) -> str:
    if "round_clock_events" not in ran.columns:
        return ""
    worst, label = 0.0, ""
    for name, events in zip(ran.label, ran.round_clock_events):
        if events is None or not len(events):
            continue
        share = sum(any(r in e for r in THROTTLED) for e in events) / len(events)
        if share > worst:
            worst, label = share, name
    if worst < THROTTLED_SHARE:
        return ""
    return (f"the GPU was slowed by heat or a hardware brake after {worst:.0%} of {label}'s bursts: a figure of a "
            "throttled GPU")
