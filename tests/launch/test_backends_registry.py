"""Third-party backends: registered through the ``deviate_cb.backends`` entry-point group, and by the registry API.

The entry-point test installs nothing: it puts a tiny ``*.dist-info`` (METADATA + entry_points.txt) and the
backend's module on ``sys.path``, which is exactly what ``importlib.metadata`` reads for an installed plug-in.
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import BACKENDS, ENTRY_POINT_GROUP, available_backends, backend_class, get_backend
from deviate_cb.launch.runner import replicate
from tests.helpers.replicate_helpers import trainer

PLUGIN = '''
"""A plug-in backend: replicas one after another, in the foreground."""
import os, subprocess, time
from deviate_cb.launch.backends.base import Backend, BackendOption, Outcome, Placement

class InlineBackend(Backend):
    name = "inline"

    def __init__(self, *, parallel=1, kill_grace_s=5.0):
        super().__init__(parallel=parallel)

    def run(self, jobs, listener):
        for job in jobs:
            placement = Placement(slot=0, host="inline")
            listener.prepare(job, placement)
            listener.started(job, placement, None)
            started = time.time()
            with open(job.stdout_path, "wb") as out, open(job.stderr_path, "wb") as err:
                rc = subprocess.run(list(job.argv), env={**os.environ, **job.env}, stdout=out, stderr=err).returncode
            listener.finished(job, placement, Outcome(rc, started_at=started, ended_at=time.time()))

    def cancel(self):
        pass


def _queue(value):
    from deviate_cb.errors import UsageError
    if value not in ("fast", "slow"):
        raise UsageError(f"`--queue` must be fast or slow. Received: --queue={value}.")
    return value


class QueuedBackend(InlineBackend):
    """A plug-in that declares an option of its own: deviate-replicate grows its flag."""

    name = "queued"
    declared = (BackendOption("queue", "--queue", "the queue replicas wait in", "queued backend (plug-in)", "NAME",
                              parse=_queue),)

    def __init__(self, *, parallel=1, kill_grace_s=5.0, queue="slow"):
        super().__init__(parallel=parallel)
        self.queue = queue

    def run(self, jobs, listener):
        jobs = list(jobs)
        super().run(jobs, listener)
        for job in jobs:  # where it ran, for the test to read
            (job.stdout_path.parent / "queue.txt").write_text(self.queue)
'''


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    dist = site / "deviate_inline_backend-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: deviate-inline-backend\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(f"""\
            [{ENTRY_POINT_GROUP}]
            inline = deviate_inline_backend:InlineBackend
            queued = deviate_inline_backend:QueuedBackend
            broken = deviate_no_such_module_xyz:Nope
            """)
    )
    (site / "deviate_inline_backend.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name in ("inline", "queued", "broken"):
        BACKENDS.pop(name, None)


def test_entry_point_backend_runs_replicas(plugin_path: Path, tmp_path: Path) -> None:
    assert {"inline", "broken", "local", "slurm", "ray"} <= set(available_backends())
    assert get_backend("inline").name == "inline"
    out = tmp_path / "runs"
    result = replicate(
        trainer("basic.py:echo"), runs=2, out=out, experiment="e", backend="inline", stream=io.StringIO()
    )
    assert result.exit_status == 0 and [r.status for r in result.replicas] == ["completed", "completed"]
    for k in range(2):
        manifest = json.loads((out / f"experiment=e/variant=algo+impl/replica={k}/run.json").read_text())
        assert manifest["backend"] == "inline" and manifest["status"] == "completed" and manifest["seed"] == k


def test_entry_point_backend_takes_no_foreign_options(plugin_path: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="`--partition` applies to other backends, not to --backend inline"):
        replicate(trainer("basic.py:echo"), out=tmp_path / "r", backend="inline", backend_options={"partition": "p"})


def test_a_plugins_declared_option_is_a_flag_of_deviate_replicate(
    plugin_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deviate_cb.cli.replicate import main

    out = tmp_path / "runs"
    words = ["-n", "1", "--out", str(out), "--experiment", "e", "--trainer", trainer("basic.py:echo")]
    assert main([*words, "--backend", "queued", "--queue", "fast"]) == 0, capsys.readouterr().err
    run_dir = out / "experiment=e/variant=algo+impl/replica=0"
    assert (run_dir / "queue.txt").read_text() == "fast"
    assert json.loads((run_dir / "run.json").read_text())["backend"] == "queued"
    capsys.readouterr()
    assert main([*words, "--force", "--backend", "queued", "--queue", "nowhere"]) == 2  # the plug-in's own parser
    assert "`--queue` must be fast or slow. Received: --queue=nowhere." in capsys.readouterr().err
    assert main([*words, "--force", "--queue", "fast"]) == 2  # not a flag without the plug-in that declares it
    assert "Unrecognized arguments: --queue fast" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--backend", "queued", "--help"])
    assert "queued backend (plug-in)" in capsys.readouterr().out


def test_backend_without_a_value_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    from deviate_cb.cli.replicate import main

    assert main(["-n", "1", "--trainer", trainer("basic.py:echo"), "--backend"]) == 2
    err = capsys.readouterr().err  # the plug-in flags' look at --backend says nothing of its own
    assert err.splitlines() == [
        "deviate-replicate: error: Argument --backend: expected one argument. See `deviate-replicate --help`."
    ], err


def test_broken_entry_point_is_a_usage_error(plugin_path: Path) -> None:
    with pytest.raises(UsageError, match=r"entry point 'deviate_no_such_module_xyz:Nope' .* cannot be loaded"):
        backend_class("broken")


def test_registry_api() -> None:
    from deviate_cb.launch.backends.local import LocalBackend

    class Mine(LocalBackend):
        name = "mine"

    try:
        from deviate_cb.launch.backends.base import register_backend

        register_backend("mine", Mine)
        assert "mine" in available_backends() and isinstance(get_backend("mine", parallel=2), Mine)
    finally:
        BACKENDS.pop("mine", None)
