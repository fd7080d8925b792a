"""The pages the documentation tier runs, in the reader's order, and their steps."""

from __future__ import annotations

from tests.docs.steps import Step, page_steps
from tests.integration.fresh_install import ROOT

#: In the reader's order: the README, then the guide as its index lists it.
PAGES = ["README.md", *(f"docs/guide/{name}" for name in (
    "quick_start.md", "browser.md", "client_api.md", "clusters.md", "code_on_workers.md", "scaling_and_cloud.md",
    "bursting.md", "slurm.md", "kubernetes.md", "monitoring_and_security.md", "failures.md", "troubleshooting.md",
    "performance_tips.md", "migrating.md", "sharing.md", "security.md", "actors_and_streams.md", "scale.md",
    "README.md",
))]  # fmt: skip


def steps_of(page: str) -> list[Step]:
    return page_steps(page, (ROOT / page).read_text())


def shell_commands_of(pages: list[str]) -> list[str]:
    """The shell commands the pages run (their steps that are not skipped), in order."""
    return [command for page in pages for step in steps_of(page) if step.skip_reason is None
            for command in step.commands]  # fmt: skip
