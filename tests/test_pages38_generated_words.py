"""Issue 34 (page read): sentences of the practitioner and benchmarks pages that state a relation about the
page's own numbers are generated from the run; these helpers write them, so they must say what the numbers
say. The truths are hand-made sequences and metadata whose answer is known."""

from __future__ import annotations

from dputils.book.chapters import benchmarks as bch
from dputils.book.chapters import your_training_run as ych


def test_trend_words_rising_only_when_strictly_increasing():
    assert ych.trend_words([0.25, 0.5, 0.627]) == "rises with the number of canaries"
    # the recorded threshold test of the practitioner page: up, then down to 0
    words = ych.trend_words([0.009122, 0.2707, 0.0])
    assert words.startswith("does not rise steadily with the number of canaries")
    assert "(0.00912, 0.271, 0)" in words
    # flat is not rising, and one value has no trend to claim
    assert ych.trend_words([0.3, 0.3]).startswith("does not rise")
    assert ych.trend_words([0.3]).startswith("does not rise")


def _meta(before, after, cpus=2, affinity=None):
    return {"machine": {"cpus": cpus, "affinity": affinity}, "load_before": before, "load_after": after}


def test_load_words_follow_the_recorded_load():
    # the recorded allocation run: load average about 10 on 2 cores
    loaded = bch.load_words(_meta([10.01, 10.65, 9.94], [7.14, 9.8, 9.99], affinity=2))
    assert loaded.startswith("a loaded machine") and "10.7" in loaded and "2 cores" in loaded
    assert "upper bounds" in loaded
    idle = bch.load_words(_meta([0.8, 1.2, 1.9], [0.9, 1.1, 1.5]))
    assert idle.startswith("a machine loaded below its 2 cores") and "1.9" in idle
    assert "upper bounds" not in idle
    # the cores the run could use decide (affinity), not the machine's count
    assert bch.load_words(_meta([3.0], [3.0], cpus=16, affinity=2)).startswith("a loaded machine")
    assert "unrecorded" in bch.load_words({"machine": {}, "load_before": [], "load_after": []})
