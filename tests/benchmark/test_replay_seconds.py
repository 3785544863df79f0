"""pygpukit.benchmark.timing.replay_seconds, the graph-replay clock of the tuning scripts: the
warm-up replays stay outside the events, the inputs hook runs before every replay, and the
elapsed time is split over the timed replays (events faked: no GPU here)."""

from __future__ import annotations

from typing import Any

import pytest

from pygpukit.benchmark import timing


class _Event:
    log: list[str]

    def __init__(self, device: int, enable_timing: bool) -> None:
        assert enable_timing and device == 3

    def record(self, stream: Any) -> None:
        _Event.log.append("event")

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: Any) -> float:
        return 12.0  # ms


class _Graph:
    def replay(self, stream: Any) -> None:
        _Event.log.append("replay")


def test_warmup_outside_the_events_and_inputs_before_each_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timing.runtime, "Event", _Event)
    _Event.log = []
    stream = type("S", (), {"device": 3})()
    got = timing.replay_seconds(
        _Graph(), stream, 4, warmup=2, before=lambda: _Event.log.append("inputs")
    )
    assert got == pytest.approx(12.0 / 1000.0 / 4)
    pair = ["inputs", "replay"]
    assert _Event.log == pair * 2 + ["event"] + pair * 4 + ["event"]
    _Event.log = []
    timing.replay_seconds(_Graph(), stream, 1)  # default warm-up 3, no hook
    assert _Event.log == ["replay"] * 3 + ["event", "replay", "event"]
