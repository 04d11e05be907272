"""What every verb shares: the parser that fails in one line, the argument types, the usage error."""

import argparse
from pathlib import Path
from typing import Any, NoReturn

from rebench import environment_names

from ..spec.choices import not_one_of

USAGE_ERROR = 2  # argparse's exit status for bad input


class CommandLineError(Exception):
    """Bad input found once a verb runs (e.g. a model role the environment does not have): one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage first; one line that names the parameter and points at --help is enough.
        self.exit(USAGE_ERROR, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def environment_argument(name: str) -> str:
    if name not in environment_names():
        raise argparse.ArgumentTypeError(not_one_of("environment", name, environment_names()))
    return name


def add_environment(command: argparse.ArgumentParser, dest: str = "environment", note: str = "", **kwargs: Any) -> None:
    """The ENV positional, checked against the registered environments and listing them in its help after `note`."""
    kwargs["help"] = f"{note}one of: {', '.join(environment_names())}"
    command.add_argument(dest, metavar="ENV", type=environment_argument, **kwargs)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def role_assignment(text: str) -> tuple[str, str]:
    role, _, model = text.partition("=")
    if not role or not model:
        raise argparse.ArgumentTypeError(f"expected ROLE=MODEL (e.g. scaffold=openai/gpt-3.5-turbo-0125), not {text!r}")
    return role, model


def existing_directory(text: str) -> Path:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return Path(text)


def existing_file(text: str) -> str:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return text
