"""Task types, by the name a study file gives in ``task:``."""
from __future__ import annotations

from hitkit.config import StudyConfig
from hitkit.errors import ConfigError
from hitkit.protocols.base import TaskType


def task_for(config: StudyConfig) -> TaskType:
    """The task type a study runs."""
    from hitkit.protocols.live_chat.task import LiveChatTask
    from hitkit.protocols.pairwise.task import PairwiseTask
    from hitkit.protocols.spot_the_bot.task import SpotTheBotTask

    registry: dict[str, type[TaskType]] = {"pairwise": PairwiseTask, "live_chat": LiveChatTask,
                                          "spot_the_bot": SpotTheBotTask}
    if config.task not in registry:
        raise ConfigError(f"task '{config.task}' is not available in this version of hitkit; "
                          f"available: {', '.join(sorted(registry))}")
    return registry[config.task](config)
