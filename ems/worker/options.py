"""The options of `ems worker`: one table gives each its flag, its EMS_WORKER_* variable,
its kind and its help. The consumer's options are ems.Consumer's keyword arguments (and
ems.aio.Consumer's `concurrency`), with their defaults read from those signatures;
tests/unit/test_worker_options.py fails when a Consumer gains an option this table
neither carries nor leaves out on purpose (NOT_FOR_WORKERS)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from ems.aio.consumer import MAX_CONCURRENCY
from ems.aio.consumer import Consumer as AsyncConsumer
from ems.config import WORKER_PREFIX
from ems.consumer import Consumer
from ems.consumer.groups import GroupOptions
from ems.exceptions import InvalidSetting
from ems.validation import check_name, check_positive_int

#: int, float, text; flag (on when given); switch (--x / --un-x, unset: the group's);
#: choice (one of `choices`).
Kind = Literal["int", "float", "text", "flag", "switch", "choice"]
#: Where an option goes: the worker's own, ems.Consumer's (and ems.aio.Consumer's), or
#: ems.aio.Consumer's only (async handlers).
Target = Literal["worker", "consumer", "aio"]

MAX_PROCESSES = 256
MAX_THREADS = 256

#: Consumer keyword arguments a worker does not take, and why.
NOT_FOR_WORKERS = {
    "settings": "the EMS_* variables",
    "store": "each member opens its own",
    "backend": "MySQL and Redis",
    "metrics_port": "the worker serves one endpoint per process (--metrics-port)",
    "transactional": "needs a transaction factory object: write a program with Consumer",
}


@dataclass(frozen=True)
class Option:
    name: str
    help: str
    kind: Kind
    target: Target = "consumer"
    choices: tuple[str, ...] = ()
    #: Given several times on the command line; comma-separated in its variable.
    multiple: bool = False
    required: bool = False
    #: A worker option's default (a consumer option's is the Consumer's own).
    own_default: Any = None
    #: The off form of a switch.
    off: str = ""
    metavar: str | None = None

    @property
    def env(self) -> str:
        return WORKER_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def default(self) -> Any:
        if self.target == "worker":
            return self.own_default
        signature = _signature(AsyncConsumer if self.target == "aio" else Consumer)
        return signature.parameters[self.name].default


@cache
def _signature(cls: type) -> inspect.Signature:
    return inspect.signature(cls)


OPTIONS: tuple[Option, ...] = (
    Option("group", "Consumer group name (created on first use).", "text", "worker",
           required=True, metavar="G"),
    Option("topic", "Topic to consume (repeatable: one group of members per topic).",
           "text", "worker", multiple=True, required=True, metavar="T"),
    Option("processes", "Worker processes; above 1 a supervisor starts them, restarts a "
           "crashed one and forwards SIGTERM/SIGINT.", "int", "worker", own_default=1,
           metavar="N"),
    Option("threads", "Members per topic in each process, each on its own thread (async "
           "handlers: each a task on the process's event loop).", "int", "worker",
           own_default=1, metavar="N"),
    Option("metrics_port", "Serve Prometheus /metrics here; process i of --processes "
           "serves on P+i (0: each picks a free port, printed).", "int", "worker",
           metavar="P"),
    Option("broadcast", "Broadcast group: every member gets every message.", "flag"),
    Option("start", "Where a new group starts.", "choice", choices=("earliest", "latest")),
    Option("ordered", "A new group's ordering: a failed message blocks its partition "
           "(unset: the group's, unordered when new).", "switch", off="--unordered"),
    Option("retry_ladder", "A new group's backoff ladder, as 1s,10s,1m.", "text",
           metavar="LADDER"),
    Option("max_attempts", "A new group's attempts before a dead letter.", "int",
           metavar="N"),
    Option("ack_timeout", "A new group's seconds before an unacked delivery is retried.",
           "int", metavar="S"),
    Option("batch_size", "Most messages a member fetches and handles at once.", "int",
           metavar="N"),
    Option("max_batch_bytes", "Most bytes of bodies in one batch.", "int", metavar="B"),
    Option("lease_ttl", "Seconds a member's lease lasts without renewal.", "float",
           metavar="S"),
    Option("renew_every", "Seconds between lease renewals.", "float", metavar="S"),
    Option("concurrency", "Handler calls at once per partition (async handlers, "
           "unordered groups).", "int", "aio", metavar="N"),
)  # fmt: skip

BY_NAME = {option.name: option for option in OPTIONS}


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """What one `ems worker` runs: the handler's path, the group and its topics, how
    many processes and members, and the consumers' keyword arguments."""

    handler: str
    group: str
    topics: tuple[str, ...]
    processes: int = 1
    threads: int = 1
    metrics_port: int | None = None
    #: ems.Consumer's keyword arguments (None: the Consumer's default).
    consumer: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int = 1

    @classmethod
    def from_values(cls, handler: str, values: Mapping[str, Any]) -> WorkerConfig:
        """From option values by name (a missing one takes its default), checked: an
        InvalidSetting (or InvalidName) before anything starts."""
        given = {o.name: values.get(o.name, o.default) for o in OPTIONS}
        consumer = {o.name: given[o.name] for o in OPTIONS if o.target == "consumer"}
        config = cls(
            handler=handler,
            group=given["group"],
            topics=tuple(given["topic"] or ()),
            processes=given["processes"],
            threads=given["threads"],
            metrics_port=given["metrics_port"],
            consumer=consumer,
            concurrency=given["concurrency"],
        )
        config.check()
        return config

    def check(self) -> None:
        check_name(self.group, "group")
        if not self.topics:
            raise InvalidSetting("a worker needs at least one --topic")
        for topic in self.topics:
            check_name(topic, "topic")
        if len(set(self.topics)) != len(self.topics):
            raise InvalidSetting(f"a topic is given twice: {', '.join(self.topics)}")
        check_positive_int(self.processes, "processes", MAX_PROCESSES)
        check_positive_int(self.threads, "threads", MAX_THREADS)
        check_positive_int(self.concurrency, "concurrency", MAX_CONCURRENCY)
        port = self.metrics_port
        if port is not None and not 0 <= port <= 65536 - (self.processes if port else 1):
            raise InvalidSetting(
                f"metrics_port must be from 0 to 65535 (with {self.processes} processes, "
                f"the last on P+{self.processes - 1}), not {port}"
            )
        GroupOptions.checked(**self.consumer)

    def child_args(self, index: int) -> list[str]:
        """The command line of process `index` under a supervisor: this config in full
        (the child reads no EMS_WORKER_* variable), one process, its own metrics port."""
        args = [self.handler, "--group", self.group]
        for topic in self.topics:
            args += ["--topic", topic]
        args += ["--processes", "1", "--threads", str(self.threads)]
        args += ["--concurrency", str(self.concurrency)]
        if self.metrics_port is not None:
            args += ["--metrics-port", str(self.metrics_port + index if self.metrics_port else 0)]
        for name, value in self.consumer.items():
            args += _flag_args(BY_NAME[name], value)
        return args

    def describe(self) -> str:
        members = len(self.topics) * self.threads
        return (
            f"handler {self.handler}, group {self.group}, topics {', '.join(self.topics)}: "
            f"{members} member{'s' if members > 1 else ''} per process"
        )


def _flag_args(option: Option, value: Any) -> list[str]:
    if value is None:
        return []
    if option.kind == "flag":
        return [option.flag] if value else []
    if option.kind == "switch":
        return [option.flag if value else option.off]
    return [option.flag, str(value)]
