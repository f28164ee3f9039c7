"""Task types, by the name a study file gives in ``task:``."""
from __future__ import annotations

from hitkit.config import StudyConfig
from hitkit.errors import ConfigError
from hitkit.tasks.base import TaskType


def task_for(config: StudyConfig) -> TaskType:
    """The task type a study runs."""
    from hitkit.tasks.live_chat import LiveChatTask
    from hitkit.tasks.pairwise import PairwiseTask
    from hitkit.tasks.spot_the_bot import SpotTheBotTask

    registry: dict[str, type[TaskType]] = {"pairwise": PairwiseTask, "live_chat": LiveChatTask,
                                          "spot_the_bot": SpotTheBotTask}
    if config.task not in registry:
        raise ConfigError(f"task '{config.task}' is not available in this version of hitkit; "
                          f"available: {', '.join(sorted(registry))}")
    return registry[config.task](config)
