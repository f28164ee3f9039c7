"""Crowd providers, by the name a study file gives in ``provider.kind``."""

from __future__ import annotations

from hitkit.errors import ConfigError
from hitkit.providers.base import CrowdProvider
from hitkit.study.config import StudyConfig


def make_provider(config: StudyConfig, secret: str) -> CrowdProvider:
    """The provider a study posts to."""
    from hitkit.providers.local import LocalProvider
    from hitkit.providers.simulated import SimulatedProvider

    kinds: dict[str, type[CrowdProvider]] = {"simulated": SimulatedProvider, "local": LocalProvider}
    # The live providers are imported only when asked for: boto3 is slow to import.
    if config.provider.kind == "mturk":
        from hitkit.providers.mturk import MTurkProvider

        kinds["mturk"] = MTurkProvider
    if config.provider.kind == "panel":
        from hitkit.providers.panel import PanelProvider

        kinds["panel"] = PanelProvider
    if config.provider.kind == "prolific":
        from hitkit.providers.prolific.provider import ProlificProvider

        kinds["prolific"] = ProlificProvider
    if config.provider.kind not in kinds:
        raise ConfigError(
            f"provider.kind '{config.provider.kind}' is not available in this version of hitkit; "
            f"available: {', '.join(sorted(kinds))}"
        )
    return kinds[config.provider.kind](config, secret)
