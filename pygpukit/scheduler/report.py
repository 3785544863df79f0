"""A scheduler snapshot as text (``python -m pygpukit sched``), in the spirit of
``gp.routing.explain``: what each context holds and why each recent decision was made."""

from __future__ import annotations

from typing import Any

from pygpukit._units import fmt_bytes

__all__ = ["format_snapshot"]


def _sms(c: dict[str, Any]) -> str:
    if c["sm_count"] is not None:
        return f"{c['sm_count']} ({c['placement']})"
    if c["planned_sms"] is not None:
        return f"{c['planned_sms']} ({c['placement']}, planned)"
    return "all"


def _pacing(c: dict[str, Any]) -> str:
    p = c["pacing"]
    if c["qos"] == "guaranteed":
        return "never paced"
    if c["pace"] is None:
        return "not paced"
    state = "throttling" if p["throttling"] else "idle gate"
    return (
        f"{c['pace']:g} of GPU time ({state}; {p['paced_launches']}/{p['launches']} launches "
        f"paced, waited {p['waited_ms']:.1f} ms, busy {p['busy_ms']:.1f} ms)"
    )


def format_snapshot(snap: dict[str, Any]) -> str:
    """The snapshot (``pygpukit.scheduler.snapshot()``) as the lines the CLI prints."""
    out = []
    sim = snap.get("simulated_device")
    where = snap.get("device_name", str(snap["device"]))
    if sim is not None:
        where = f"{where} (CPU simulation of device {sim})"
    out.append(
        f"device {where}: capacity {fmt_bytes(snap['capacity'])}, reserved "
        f"{fmt_bytes(snap['reserved'])}, unreserved {fmt_bytes(snap['unreserved'])}, borrowed "
        f"by tasks {fmt_bytes(snap['borrowed'])}"
    )
    if snap["sm_total"] is not None:
        out.append(
            f"SMs: {snap['sm_total']} ({snap['sm_carvable']} in groups of "
            f"{snap['sm_granularity']} that partitions are made of), {snap['sm_free']} not held "
            "by any partition"
        )
    if snap["sm_note"]:
        out.append(f"SM partitions: {snap['sm_note']}")
    idle = snap["guaranteed_idle_ms"]
    last = "never" if idle is None else f"{idle:.1f} ms ago"
    out.append(
        f"pacing: paced contexts are throttled while a Guaranteed context launched within "
        f"{snap['active_window_ms']:g} ms (last Guaranteed launch: {last})"
    )
    out.append("")
    if not snap["contexts"]:
        out.append("no contexts")
    else:
        head = ("context", "qos", "reserved", "limit", "SMs", "prio", "stream", "in use", "peak")
        rows = [head]
        for c in snap["contexts"]:
            m = c["memory"]
            rows.append(
                (
                    c["name"],
                    c["qos"],
                    fmt_bytes(c["reservation"]),
                    "none" if c["limit"] is None else fmt_bytes(c["limit"]),
                    _sms(c),
                    str(c["priority"]),
                    str(c["stream_priority"]),
                    fmt_bytes(m["current_bytes"]),
                    fmt_bytes(m["peak_bytes"]),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        for r in rows:
            out.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        out.append("")
        for c in snap["contexts"]:
            t = c["tasks"]
            out.append(
                f"{c['name']}: tasks {t['running']} running, {t['admitted']} admitted, "
                f"{t['pending']} pending, {t['completed']} completed, {t['failed']} failed, "
                f"{t['cancelled']} cancelled (claims {fmt_bytes(c['claims'])}); "
                f"pacing: {_pacing(c)}"
            )
    waiting = [t for t in snap["tasks"] if t["state"] == "pending"]
    if waiting:
        out.append("")
        out.append("pending tasks:")
        for t in waiting:
            out.append(f"  {t['id']} '{t['name']}' of '{t['context']}': {t['reason'] or ''}")
    if snap["decisions"]:
        out.append("")
        out.append("recent admission decisions:")
        for d in snap["decisions"]:
            out.append(f"  #{d['seq']} {d['subject']}: {d['outcome']} ({d['detail']})")
    return "\n".join(out)
