"""The test fault hook (``zerda_eval.faults``): it acts only at the point and passage it names."""

from __future__ import annotations

import signal

import pytest

from zerda_eval import faults


@pytest.fixture
def sent(monkeypatch):
    signals: list[tuple[int, int]] = []
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: signals.append((pid, sig)))
    return signals


def test_unset_does_nothing(monkeypatch, sent):
    monkeypatch.delenv(faults.FAULT_ENV, raising=False)
    faults.fault_point("after-cell", 3)
    assert sent == []


def test_acts_at_the_named_point_and_passage_only(monkeypatch, sent):
    monkeypatch.setenv(faults.FAULT_ENV, "kill-after-cell:3")
    for passage in (1, 2, 4):
        faults.fault_point("after-cell", passage)
    faults.fault_point("in-index-build", 3)
    assert sent == []
    faults.fault_point("after-cell", 3)
    assert sent == [(faults.os.getpid(), signal.SIGKILL)]


def test_interrupt_is_sigint_and_no_passage_means_the_first(monkeypatch, sent):
    monkeypatch.setenv(faults.FAULT_ENV, "interrupt-in-index-build")
    faults.fault_point("in-index-build", 2)
    faults.fault_point("in-index-build")
    assert sent == [(faults.os.getpid(), signal.SIGINT)]


@pytest.mark.parametrize("value", ["explode-after-cell:1", "kill-after-cell:0", "kill", "kill-after-cell:x"])
def test_a_malformed_fault_is_an_error_not_a_silent_pass(monkeypatch, sent, value):
    monkeypatch.setenv(faults.FAULT_ENV, value)
    with pytest.raises(ValueError, match=faults.FAULT_ENV):
        faults.fault_point("after-cell", 1)
