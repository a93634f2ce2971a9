"""How `ccemu --help` and each command's help read, and `ccemu --version`."""

from __future__ import annotations

import argparse
import copy
import re


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default where it has one to say. argparse's own
    ArgumentDefaultsHelpFormatter would also print a default of None, a flag's False or an empty
    list, which mean "not given": their help says in words what holds then (the file's value,
    say), where `(default: None)` would mislead. Options without help still show theirs."""

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        default = action.default
        return bool(action.option_strings) and default is not None and default is not False \
            and default != argparse.SUPPRESS and default != []

    @staticmethod
    def _default(action: argparse.Action) -> str:
        default = action.default
        text = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"(default: {text.replace('%', '%%')})"  # a help is a %-format

    def _get_help_string(self, action: argparse.Action) -> str:
        said = action.help or ""
        if self._shows_default(action) and not re.search(r"\bdefault\b", said):  # unless it says its own
            said += " " + self._default(action)
        return said

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        # argparse measures a subcommand's name at its parent's indent but prints it 2 deeper: the
        # longest (experiment) would go on a line of its own, its summary below it.
        for command in getattr(action, "_get_subactions", list)():
            self._action_max_length = max(self._action_max_length, self._current_indent + 2 + len(command.dest))

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and self._shows_default(action):
            action = copy.copy(action)
            action.help = self._default(action)
        return super()._format_action(action)


class MainHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """`ccemu --help`: its description and epilog (the exit statuses) as written."""


def version() -> str:
    """ccemu's version as installed (emulation/pyproject.toml's), and the commit of this tree
    (experiments/provenance.py's, as a bundle's manifest records it) where there is one."""
    from importlib import metadata

    from ..experiments.provenance import git_commit

    try:
        installed = metadata.version("ccemu")
    except metadata.PackageNotFoundError:  # run from a tree that was never `pip install`ed
        installed = "(not installed: `make setup`)"
    commit = git_commit()
    return f"ccemu {installed}" + (f" (git {commit})" if commit != "unknown" else "")


class VersionAction(argparse.Action):
    """--version: asks git only when given (argparse's own version action takes its text when the
    parser is built, which would run git on every command)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()
