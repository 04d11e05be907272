"""The scales every environment runs at. A module of its own so that the `rebench` command's choices load light."""

from typing import Literal

Scale = Literal["smoke", "full"]
SCALES: tuple[Scale, ...] = ("smoke", "full")
