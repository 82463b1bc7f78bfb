"""`ems worker`: run a handler as members of a consumer group, in one process or under a
supervisor of several. Its options are made from ems.worker.options' table, each also
settable by its EMS_WORKER_* variable (the command line wins)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import click

from ems.cli.common import settings
from ems.cli.params import WHOLE, number
from ems.config import worker_environment
from ems.exceptions import InvalidSetting
from ems.worker.options import OPTIONS, Option, WorkerConfig
from ems.worker.process import run_process
from ems.worker.supervisor import Supervisor

# Numbers are finite and of sane size before the consumer's own checks see them (which
# name the option in their message), as every number option of the command line is.
_TYPES: dict[str, Any] = {
    "int": WHOLE,
    "float": number(),
    "text": click.STRING,
    "flag": click.BOOL,
    "switch": click.BOOL,
}


class WorkerCommand(click.Command):
    """A command whose option defaults come from the EMS_WORKER_* variables: a variable
    given on the command line too is overridden; a bad one is an InvalidSetting naming it."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        extra.setdefault("default_map", _defaults(self))
        return super().make_context(info_name, args, parent, **extra)


def _defaults(command: click.Command) -> dict[str, Any]:
    params = {p.name: p for p in command.params if isinstance(p, click.Option)}
    ctx = click.Context(command)
    defaults: dict[str, Any] = {}
    for name, raw in worker_environment().items():
        param = params.get(name)
        if param is None:
            known = ", ".join(o.env for o in OPTIONS)
            raise InvalidSetting(f"{_env(name)} is not an option of ems worker ({known})")
        value: Any = [v.strip() for v in raw.split(",") if v.strip()] if param.multiple else raw
        try:
            defaults[name] = param.type_cast_value(ctx, value)
        except click.BadParameter as exc:
            raise InvalidSetting(f"{_env(name)}: {exc.message}") from None
    return defaults


def _env(name: str) -> str:
    return f"EMS_WORKER_{name.upper()}"


def _option(option: Option) -> Callable[[click.Command], click.Command]:
    kwargs: dict[str, Any] = {"help": f"{option.help} [{option.env}]", "metavar": option.metavar}
    decls = [option.flag]
    if option.kind == "flag":
        kwargs.update(is_flag=True, default=bool(option.default))
    elif option.kind == "switch":
        decls = [f"{option.flag}/{option.off}"]
        kwargs.update(default=None)
    elif option.kind == "choice":
        kwargs.update(type=click.Choice(option.choices), default=option.default)
    else:
        kwargs.update(type=_TYPES[option.kind], default=option.default)
        if option.default is not None and not option.multiple:
            kwargs["show_default"] = True
    if option.multiple:
        kwargs.update(multiple=True, default=())
    kwargs["required"] = option.required
    return click.option(*decls, option.name, **kwargs)


def _options(command: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(OPTIONS):
        command = _option(option)(command)  # type: ignore[arg-type]
    return command


@click.command(cls=WorkerCommand)
@click.argument("handler")
@_options
def worker(handler: str, **values: Any) -> None:
    """Run HANDLER (package.module:function, a plain or `async def` function of one
    Delivery) as members of consumer group --group on each --topic: returning acks,
    raising retries. SIGTERM or SIGINT: each member finishes its batch, acks, commits and
    leaves. Every option also reads its EMS_WORKER_* variable."""
    config = WorkerConfig.from_values(handler, values)
    current = settings()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    if config.processes > 1:
        raise SystemExit(Supervisor(config, _say).run())
    handled = run_process(config, current, _say)
    _say(f"worker left its group: {handled} messages handled")


def _say(line: str) -> None:
    click.echo(line, err=True)
