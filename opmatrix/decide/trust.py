"""When a verdict is not to be trusted as it stands, and why: what the cell measured of the machine while the
verdict's rows were timed. Each caveat names its rows' worst figure and the rule that raised it.

- a busy CPU: a row waited BUSY_PCT of its timed calls' time for a core other processes held (taken out of its
  times, but what is left is less sure), or other processes kept OTHERS_CORES cores busy in the median round;
- strayed rounds (opmatrix.core.straying): left out of the intervals (said, not a doubt), or so many in a row that
  they were kept (a doubt: the row's rounds are not one distribution);
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


def caveats(ran) -> tuple[list[str], list[str]]:
    """(what was done and only needs saying, the doubts) of a verdict over these rows (a frame with READ's columns
    where present)."""
    said, kept = _strays(ran)
    doubts = [text for text in (_waited(ran), _others(ran), kept, _capped(ran)) if text]
    return [said] if said else [], doubts


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


def _strays(ran) -> tuple[str, str]:
    """(the rounds left out, said; the rows whose strays were too many to leave out, a doubt). A row with a stray
    note and none of its rounds left out kept them (straying.MOST_SHARE)."""
    if "stray_note" not in ran.columns:
        return "", ""
    notes = [(label, note, left) for label, note, left in zip(ran.label, ran.stray_note.fillna(""), ran.strayed_rounds)
             if note]
    left_out = [(label, note, left) for label, note, left in notes if left > 0]
    kept = [(label, note) for label, note, left in notes if not left > 0]
    said = ""
    if left_out and not kept:  # where some row kept its strays, the doubt speaks for the rounds
        label, note, _ = left_out[0]
        said = (f"rounds that strayed were left out of the intervals ({int(sum(n for *_, n in left_out))} over "
                f"{len(left_out)} row(s)); {label}: {note}")
    doubt = f"rounds do not follow one distribution in {len(kept)} row(s): {kept[0][0]}: {kept[0][1]}" if kept else ""
    return said, doubt


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
