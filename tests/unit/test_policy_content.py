"""policy_content grammars (surface.md §5.1, §5.2) and the registry: values and every refusal."""

from __future__ import annotations

import pytest

from scaler.policy.content import Allocation, WaterfallRule, parse_simple_content, parse_waterfall_content
from scaler.policy.registry import DEFAULT_POLICY_CONTENT, make_policy
from scaler.policy.scaling import CapabilityScaling, NoScaling, VanillaScaling, WaterfallScaling, WorkScaling

# ---------------------------------------------------------------- simple


def test_default_content() -> None:
    content = parse_simple_content(DEFAULT_POLICY_CONTENT)
    assert (content.allocate, content.scaling) == (Allocation.CAPABILITY, "vanilla")  # capabilities honoured
    assert (content.vanilla_upper_ratio, content.vanilla_lower_ratio) == (10.0, 1.0)


def test_whitespace_trimmed_and_items_without_equals_ignored() -> None:
    content = parse_simple_content("  allocate = capability ;; junk ; scaling=capability ; ")
    assert (content.allocate, content.scaling) == (Allocation.CAPABILITY, "capability")


def test_thresholds_are_settable() -> None:
    vanilla = parse_simple_content("allocate=even_load;scaling=vanilla;vanilla_upper_ratio=4;vanilla_lower_ratio=0.5")
    assert (vanilla.vanilla_upper_ratio, vanilla.vanilla_lower_ratio) == (4.0, 0.5)
    capability = parse_simple_content("allocate=capability; scaling=capability; capability_tasks_per_worker=2")
    assert capability.capability_tasks_per_worker == 2
    work = parse_simple_content("allocate=even_load; scaling=work; cooldown_seconds=0; work_tasks_per_worker=3")
    assert (work.cooldown_seconds, work.work_tasks_per_worker) == (0.0, 3)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("allocate=even_load; scaling=vanilla; color=red", r"unknown key 'color'; allowed keys: allocate, scaling, "),
        ("allocate=even_load", r"key 'scaling' is missing"),
        ("scaling=no", r"key 'allocate' is missing"),
        ("", r"key 'allocate' is missing"),
        ("allocate=even; scaling=no", r"allocate='even' is not one of: even_load, capability"),
        ("allocate=even_load; scaling=Vanilla", r"scaling='Vanilla' is not one of: no, vanilla, capability, work"),
        ("allocate=even_load; scaling=", r"scaling='' is not one of"),
        ("allocate=even_load; allocate=capability; scaling=no", r"key 'allocate' is given twice"),
        ("allocate=even_load; scaling=vanilla; cooldown_seconds=5", r"cooldown_seconds applies to scaling=work"),
        ("allocate=even_load; scaling=work; vanilla_upper_ratio=5", r"vanilla_upper_ratio applies to scaling=vanilla"),
        ("allocate=even_load; scaling=work; cooldown_seconds=soon", r"cooldown_seconds='soon' is not a number"),
        ("allocate=even_load; scaling=work; cooldown_seconds=-1", r"'-1' must be a finite number >= 0"),
        ("allocate=even_load; scaling=work; cooldown_seconds=inf", r"must be a finite number"),
        ("allocate=even_load; scaling=work; cooldown_seconds=nan", r"must be a finite number"),
        ("allocate=even_load; scaling=work; work_tasks_per_worker=0", r"='0' must be an integer >= 1"),
        ("allocate=even_load; scaling=work; work_tasks_per_worker=1.5", r"'1.5' is not an integer"),
        ("allocate=even_load; scaling=vanilla; vanilla_upper_ratio=0", r"vanilla_upper_ratio='0' must be .* > 0"),
        (
            "allocate=even_load; scaling=vanilla; vanilla_upper_ratio=2; vanilla_lower_ratio=3",
            r"vanilla_lower_ratio=3 is above vanilla_upper_ratio=2",
        ),
    ],
)
def test_simple_refusals_name_the_key(content: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_simple_content(content)


# ---------------------------------------------------------------- waterfall_v1

WATERFALL = """
# cheap tier first
1, local, 8
2, cloud        # the manager's own maximum applies
tasks_per_worker = 4
"""


def test_waterfall_rules_parsed() -> None:
    content = parse_waterfall_content(WATERFALL)
    assert content.rules == (WaterfallRule(1, "local", 8), WaterfallRule(2, "cloud", None))
    assert content.tasks_per_worker == 4


def test_waterfall_rules_sorted_by_priority_ties_in_written_order() -> None:
    content = parse_waterfall_content("3, c\n1, a\n3, b\n")
    assert [rule.manager_id for rule in content.rules] == ["a", "c", "b"]
    assert content.tasks_per_worker == 10


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("1, a\n2", r"line 2 \('2'\): expected 'priority, worker_manager_id\[, max_workers\]', got 1 fields"),
        ("1, a, 3, 4", r"line 1 \('1, a, 3, 4'\): expected .* got 4 fields"),
        ("# header\n\none, a", r"line 3 \('one, a'\): priority 'one' is not an integer"),
        ("1, a, many", r"line 1 \('1, a, many'\): max_workers 'many' is not an integer"),
        ("1, a, -1", r"line 1 .*max_workers must be >= 0"),
        ("1, a\n2,  ", r"line 2 \('2,'\): worker_manager_id is empty"),
        ("1, a\n\n2, a", r"line 3 \('2, a'\): worker manager id 'a' already has a rule on line 1"),
        ("", r"has no rules"),
        ("# only a comment\n   \n", r"has no rules"),
        ("1, a\nspeed = 3", r"line 2 \('speed = 3'\): unknown setting 'speed'; allowed settings: tasks_per_worker"),
        ("1, a\ntasks_per_worker = 0", r"line 2 .*tasks_per_worker must be >= 1"),
        ("1, a\ntasks_per_worker = x", r"line 2 .*tasks_per_worker 'x' is not an integer"),
    ],
)
def test_waterfall_refusals_name_the_line(content: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_waterfall_content(content)


# ---------------------------------------------------------------- registry


def test_registry_builds_each_scaling() -> None:
    assert isinstance(make_policy("simple", "allocate=even_load; scaling=no").scaling, NoScaling)
    assert make_policy("simple", DEFAULT_POLICY_CONTENT).scaling == VanillaScaling(10.0, 1.0)
    config = make_policy("simple", "allocate=capability; scaling=capability; capability_tasks_per_worker=3")
    assert (config.allocate, config.scaling) == (Allocation.CAPABILITY, CapabilityScaling(3))
    work = make_policy("simple", "allocate=even_load; scaling=work; cooldown_seconds=30")
    assert work.scaling == WorkScaling(tasks_per_worker=1, cooldown_seconds=30.0)


def test_grammar_defaults_match_the_policy_defaults() -> None:
    assert make_policy("simple", "allocate=even_load; scaling=vanilla").scaling == VanillaScaling()
    assert make_policy("simple", "allocate=even_load; scaling=capability").scaling == CapabilityScaling()
    assert make_policy("simple", "allocate=even_load; scaling=work").scaling == WorkScaling()
    waterfall = make_policy("waterfall_v1", "1, a").scaling
    assert isinstance(waterfall, WaterfallScaling)
    assert waterfall.tasks_per_worker == WaterfallScaling(rules=()).tasks_per_worker


def test_waterfall_forces_capability_allocation() -> None:
    config = make_policy("waterfall_v1", WATERFALL)
    assert config.allocate is Allocation.CAPABILITY
    assert isinstance(config.scaling, WaterfallScaling)
    assert config.scaling.tasks_per_worker == 4
    assert "1:local; 2:cloud" in config.scaling.name


@pytest.mark.parametrize("engine_type", ["Simple", "waterfall", "", "advance"])
def test_unknown_engine_type(engine_type: str) -> None:
    with pytest.raises(ValueError, match=r"is not one of: simple, waterfall_v1"):
        make_policy(engine_type, DEFAULT_POLICY_CONTENT)
