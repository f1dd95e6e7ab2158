"""Every ``tenure`` command and subcommand says what it does: ``tenure --help`` and each group's
``--help`` list a summary line for every command (a command declared without help shows a blank)."""

from __future__ import annotations

import click

from tenure.cli import main


def _commands(group: click.Group, path: str = "tenure"):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        yield f"{path} {name}", cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{path} {name}")


def test_every_command_has_a_help_summary():
    blank = [path for path, cmd in _commands(main) if not cmd.get_short_help_str().strip()]
    assert blank == []


def test_queue_pause_and_resume_say_what_they_do():
    queues = main.get_command(click.Context(main), "queues")
    assert "Stop claims from queue NAME" in queues.get_command(click.Context(queues), "pause").help
    assert "claim from queue NAME again" in queues.get_command(click.Context(queues), "resume").help


def test_the_root_help_says_which_commands_take_json():
    """``tenure --help`` names the commands without --json; every other one has it, and --url."""
    assert "all but worker and dashboard" in " ".join(main.help.split())
    for path, cmd in _commands(main):
        if isinstance(cmd, click.Group):
            continue
        options = {opt for p in cmd.params for opt in getattr(p, "opts", ())}
        assert "--url" in options, path
        assert ("--json" in options) == (path not in ("tenure worker", "tenure dashboard")), path


def test_every_option_says_what_it_does():
    """`tenure schedules add --help` listed --queue with no word on it; so did nine other options."""
    blank = [f"{path} {param.opts[0]}" for path, cmd in _commands(main) if not isinstance(cmd, click.Group)
             for param in cmd.params if isinstance(param, click.Option) and not param.hidden and not param.help]
    assert blank == []
