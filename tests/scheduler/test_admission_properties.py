"""Admission, as properties (hypothesis) over random request sequences on the CPU simulation:
reservations never exceed the capacity, SM partitions never exceed the SMs, the same sequence
always gives the same decisions, every refusal is an AdmissionError that names its subject and
reason with the numbers, and every task moves only along the lifecycle's legal edges."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygpukit import _core
from pygpukit.errors import AdmissionError

CAPACITY = 1000
SMS = 132
QOS = ("guaranteed", "burstable", "best_effort")
LEGAL = {
    ("pending", "admitted"),
    ("pending", "cancelled"),
    ("pending", "failed"),
    ("admitted", "running"),
    ("admitted", "cancelled"),
    ("running", "completed"),
    ("running", "failed"),
    ("running", "cancelled"),
}

request = st.one_of(
    st.tuples(
        st.just("context"),
        st.integers(0, 5),
        st.sampled_from(QOS),
        st.integers(0, 700),
        st.one_of(st.none(), st.sampled_from([0.05, 0.2, 0.25, 0.5, 0.75, 1.0])),
    ),
    st.tuples(st.just("close"), st.integers(0, 5)),
    st.tuples(st.just("task"), st.integers(0, 5), st.integers(0, 800), st.integers(-2, 2)),
    st.tuples(st.just("finish"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("cancel"), st.integers(0, 40)),
)


def _context_args(qos: str, m: int) -> dict[str, Any]:
    if qos == "guaranteed":
        return {"qos": qos, "limit": m + 1}
    if qos == "burstable":
        return {"qos": qos, "reservation": m, "limit": m + 100}
    return {"qos": qos}


def play(reqs: list[tuple[Any, ...]]) -> list[str]:
    s = _core.Scheduler(-1, capacity=CAPACITY, sim_sms=SMS)
    ids: list[int] = []
    seen: dict[int, str] = {}
    out: list[str] = []
    for r in reqs:
        kind = r[0]
        try:
            if kind == "context":
                _, n, qos, m, share = r
                c = s.create_context(f"c{n}", sm_share=share, **_context_args(qos, m))
                out.append(f"admitted c{n} {c.placement} {c.planned_sms}")
            elif kind == "close":
                out.append(f"closed {s.remove_context(f'c{r[1]}')}")
            elif kind == "task":
                tid, state = s.submit(f"c{r[1]}", "", r[2], r[3])
                ids.append(tid)
                out.append(f"task {tid} {state}")
            elif kind == "finish" and r[1] < len(ids):
                tid = ids[r[1]]
                if s.task(tid) and s.task(tid)["state"] == "admitted":
                    s.start(tid)
                    seen[tid] = "running"
                out.append(f"finish {s.finish(tid, None if r[2] else 'boom')}")
            elif kind == "cancel" and r[1] < len(ids):
                out.append(f"cancel {s.cancel(ids[r[1]])}")
            else:
                out.append("skip")
        except AdmissionError as e:
            assert e.subject and e.reason, "a refusal names what asked and why"
            assert e.subject in str(e) and e.reason in str(e)
            assert str(e.unreserved) in str(e)
            out.append(f"refused {e.subject}: {e.reason}")
        except ValueError as e:  # illegal transitions, unknown contexts: errors, not decisions
            out.append(f"error {e}")
        snap = s.snapshot()
        assert 0 <= snap["reserved"] <= snap["capacity"] == CAPACITY
        assert snap["reserved"] + snap["unreserved"] == CAPACITY
        assert snap["borrowed"] <= snap["unreserved"]
        carved = sum(
            c["planned_sms"] for c in snap["contexts"] if c["placement"] in ("exclusive", "capped")
        )
        assert carved <= SMS and snap["sm_free"] == SMS - carved
        for c in snap["contexts"]:
            assert c["limit"] is None or c["claims"] <= c["limit"]
        for t in snap["tasks"]:
            prev = seen.get(t["id"])
            if prev is not None and prev != t["state"]:
                assert (prev, t["state"]) in LEGAL, f"task {t['id']}: {prev} -> {t['state']}"
            seen[t["id"]] = t["state"]
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(request, max_size=40))
def test_admission_is_deterministic_bounded_and_explained(reqs: list[tuple[Any, ...]]) -> None:
    assert play(reqs) == play(reqs)


def test_refusal_names_request_free_memory_and_holders() -> None:
    s = _core.Scheduler(-1, capacity=CAPACITY)
    s.create_context("chat", qos="guaranteed", limit=700)
    with pytest.raises(AdmissionError) as e:
        s.create_context("second", qos="burstable", reservation=400, limit=900)
    err = e.value
    assert (err.requested, err.unreserved, err.holders) == (400, 300, [("chat", 700)])
    msg = str(err)
    assert "context 'second'" in msg and "400" in msg and "300 of 1000" in msg
    assert "'chat' 700" in msg
    assert [c.name for c in s.contexts()] == ["chat"], "never half-admitted"
    assert s.snapshot()["decisions"][-1]["outcome"] == "refused"


def test_evaluate_changes_nothing() -> None:
    s = _core.Scheduler(-1, capacity=CAPACITY, sim_sms=SMS)
    assert s.evaluate("a", qos="guaranteed", limit=500, sm_share=0.5) == ("exclusive", 66)
    assert s.snapshot()["contexts"] == [] and s.snapshot()["decisions"] == []
    with pytest.raises(AdmissionError):
        s.evaluate("b", qos="guaranteed", limit=2000)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"qos": "guaranteed"}, "needs a limit"),
        ({"qos": "guaranteed", "limit": 10, "reservation": 5}, "must equal its limit"),
        ({"qos": "best_effort", "reservation": 5}, "reserves nothing"),
        ({"qos": "gold"}, "qos must be"),
        ({"sm_share": 1.5}, r"sm_share must be in \(0, 1\]"),
        ({"pace": 0.0, "default_pace": False}, r"pace must be in \(0, 1\]"),
        ({"reservation": -1}, "reservation must be >= 0"),
        ({"limit": 0}, "limit of 0 bytes"),
    ],
)
def test_bad_specs_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    s = _core.Scheduler(-1, capacity=CAPACITY)
    with pytest.raises(ValueError, match=match):
        s.create_context("x", **kwargs)
    assert s.snapshot()["contexts"] == []
