"""`ems worker`'s options (no servers): the table follows the Consumers' signatures, the
EMS_WORKER_* variables fill what the command line leaves out, a supervisor's children get
the whole configuration on their command line, the restart policy, and the handler path."""

from __future__ import annotations

import inspect

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ems.aio import Consumer as AsyncConsumer
from ems.cli.app import cli
from ems.cli.worker import worker
from ems.config import worker_environment
from ems.consumer import Consumer
from ems.exceptions import HandlerImportFailed, HandlerNotFound, InvalidHandler, InvalidInput
from ems.worker.handlers import is_async, load_handler
from ems.worker.options import NOT_FOR_WORKERS, OPTIONS, WorkerConfig
from ems.worker.restarts import GiveUp, Restart, RestartPolicy, after_exit

OWN = {"group", "topic", "handler"}


def _names(target: str) -> set[str]:
    return {o.name for o in OPTIONS if o.target == target}


def test_the_table_carries_every_consumer_option_or_says_why_not() -> None:
    sync = set(inspect.signature(Consumer).parameters) - OWN
    assert _names("consumer") | set(NOT_FOR_WORKERS) == sync
    aio = set(inspect.signature(AsyncConsumer).parameters) - OWN
    assert aio - _names("consumer") - set(NOT_FOR_WORKERS) == _names("aio")


def test_consumer_defaults_are_the_consumers_own() -> None:
    by_name = {o.name: o for o in OPTIONS}
    assert (
        by_name["batch_size"].default
        == inspect.signature(Consumer).parameters["batch_size"].default
    )
    assert by_name["concurrency"].default == 1
    assert by_name["processes"].default == 1


def test_every_option_has_a_flag_and_a_variable() -> None:
    flags = {o for p in worker.params if isinstance(p, click.Option) for o in p.opts}
    for option in OPTIONS:
        assert option.flag in flags
        assert option.env == f"EMS_WORKER_{option.name.upper()}"


def _parse(args: list[str], env: dict[str, str] | None = None) -> WorkerConfig:
    seen: list[WorkerConfig] = []

    @click.command(cls=type(worker), params=worker.params)
    def probe(**values: object) -> None:
        handler = values.pop("handler")
        assert isinstance(handler, str)
        seen.append(WorkerConfig.from_values(handler, values))

    result = CliRunner().invoke(probe, args, env=env, standalone_mode=False)
    if result.exception is not None:
        raise result.exception
    return seen[0]


def test_variables_fill_what_the_command_line_leaves_out() -> None:
    env = {
        "EMS_WORKER_GROUP": "from-env",
        "EMS_WORKER_TOPIC": "a, b",
        "EMS_WORKER_BATCH_SIZE": "50",
        "EMS_WORKER_ORDERED": "true",
        "EMS_WORKER_PROCESSES": "3",
    }
    config = _parse(["m:h", "--batch-size", "70"], env)
    assert (config.group, config.topics, config.processes) == ("from-env", ("a", "b"), 3)
    assert config.consumer["batch_size"] == 70  # the command line wins
    assert config.consumer["ordered"] is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMS_WORKER_BATCH_SIZE": "many"}, "EMS_WORKER_BATCH_SIZE: 'many' is not a valid integer"),
        ({"EMS_WORKER_BACH_SIZE": "5"}, "EMS_WORKER_BACH_SIZE is not an option of ems worker"),
        ({"EMS_WORKER_START": "now"}, "EMS_WORKER_START: 'now' is not one of"),
    ],
)
def test_a_bad_variable_is_refused_by_name(env: dict[str, str], message: str) -> None:
    result = CliRunner().invoke(cli, ["worker", "m:h", "--group", "g", "--topic", "t"], env=env)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "0"], "batch_size must be an integer from 1"),
        (["--processes", "0"], "processes must be an integer from 1"),
        (["--topic", "t"], "a topic is given twice"),
        (["--metrics-port", "65535", "--processes", "2"], "metrics_port must be from 0"),
        (["--renew-every", "20"], "renew_every (20.0) must be shorter than lease_ttl"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(args: list[str], message: str) -> None:
    command = ["worker", "m:h", "--group", "g", "--topic", "t", *args]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_a_childs_command_line_is_the_whole_configuration() -> None:
    args = ["m:h", "--group", "g", "--topic", "a", "--topic", "b", "--processes", "4"]
    args += ["--unordered", "--broadcast", "--start", "earliest", "--retry-ladder", "1s,5s"]
    args += ["--threads", "2", "--metrics-port", "9100", "--lease-ttl", "7"]
    config = _parse(args)
    child = _parse(config.child_args(2), {"EMS_WORKER_BATCH_SIZE": "1"})
    assert child.processes == 1 and child.metrics_port == 9102
    assert child.consumer == config.consumer  # every value on the line: no variable wins
    assert (child.topics, child.threads, child.handler) == (("a", "b"), 2, "m:h")
    assert _parse([*args, "--metrics-port", "0"]).child_args(3).count("0") >= 1


def test_worker_environment_reads_the_prefixed_variables() -> None:
    env = {"EMS_WORKER_GROUP": " g ", "EMS_WORKER_TOPIC": "", "EMS_GAP_TIMEOUT": "1"}
    assert worker_environment(env) == {"group": "g"}


# -- the restart policy -------------------------------------------------------------------

POLICY = RestartPolicy()


def test_bad_input_is_never_restarted() -> None:
    assert isinstance(after_exit(POLICY, 0, 100.0, 2), GiveUp)


def test_a_process_that_ran_a_while_is_restarted_at_once() -> None:
    assert after_exit(POLICY, 4, POLICY.quick, -9) == Restart(0.0, 0)


def test_quick_failures_back_off_then_give_up() -> None:
    failures, delays = 0, []
    while True:
        verdict = after_exit(POLICY, failures, 0.5, 1)
        if isinstance(verdict, GiveUp):
            break
        delays.append(verdict.delay)
        failures = verdict.failures
    assert delays == [0.25, 0.5, 1.0, 2.0]
    assert "failed 5 times in a row" in verdict.reason


@given(st.integers(0, 1000), st.floats(0, 9.99))
def test_unreachable_servers_are_waited_for_not_given_up(failures: int, ran: float) -> None:
    verdict = after_exit(POLICY, failures, ran, 3)
    assert isinstance(verdict, Restart)
    assert 0 < verdict.delay <= POLICY.max_delay


# -- the handler path -----------------------------------------------------------------------


def test_a_handler_is_found_by_its_path() -> None:
    plain = load_handler("tests.procs.worker_handlers:record")
    coroutine = load_handler("tests.procs.worker_handlers:record_async")
    assert not is_async(plain) and is_async(coroutine)
    assert load_handler("os.path:join") is __import__("os").path.join


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("tests.procs.worker_handlers", HandlerNotFound),
        ("tests.procs.worker_handlers:", HandlerNotFound),
        ("tests/procs:record", HandlerNotFound),
        ("tests.procs.nothing_here:record", HandlerNotFound),
        ("tests.procs.worker_handlers:NOT_CALLABLE", InvalidHandler),
        ("tests.procs.worker_broken:handle", HandlerImportFailed),
    ],
)
def test_a_bad_handler_path_is_typed(path: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        load_handler(path)
    assert issubclass(error, InvalidInput)  # exit code 2
