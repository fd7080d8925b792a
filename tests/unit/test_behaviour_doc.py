"""docs/behaviour.md states the defaults a user relies on as the settings declare them (checked by hand: its
"Protected mode" choice said `scaler_scheduler` defaults to unprotected, against `SchedulerConfig.protected` and its
own "Differences from the reference", and this test failed naming that sentence)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from scaler.config.sections import SchedulerConfig

PAGE = Path(__file__).resolve().parents[2] / "docs" / "behaviour.md"


def test_every_sentence_on_the_schedulers_protection_says_its_declared_default() -> None:
    protected = next(field.default for field in dataclasses.fields(SchedulerConfig) if field.name == "protected")
    assert protected is True
    page = re.sub(r"\s+", " ", PAGE.read_text())
    claims = re.findall(r"`scaler_scheduler` (is protected by default|defaults to (?:un)?protected)", page)
    assert claims, "docs/behaviour.md no longer says whether scaler_scheduler is protected by default"
    wrong = [claim for claim in claims if claim != "is protected by default" and claim != "defaults to protected"]
    assert wrong == [], (
        f"docs/behaviour.md says `scaler_scheduler` {wrong[0]}; SchedulerConfig.protected is {protected}"
    )
