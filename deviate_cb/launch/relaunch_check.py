"""Whether ``--until-decided`` may relaunch the group B its manifests describe: a manifest is not a command.

Example:
    >>> program(None, ["python3", "-u", "train.py", "--lr", "0.1"]), program("train.py:main")
    (('python', 'train.py'), ('python', 'train.py'))
    >>> program(None, ["torchrun", "train.py"])
    ('command', 'torchrun', 'train.py')
    >>> from deviate_cb.store.manifest import RunManifest
    >>> for line in recorded_disagreements(RunManifest.from_json({"mode": "command", "command": ["python", "t.py"],
    ...         "argv": ["deviate-replicate", "-n", "2", "--", "python", "t.py"],
    ...         "configuration": {"mode": "command", "command": ["touch", "x"]}})):
    ...     print(line)
    its configuration's command ['touch', 'x'] vs its own ['python', 't.py']
    its configuration's command ['touch', 'x'] vs its argv's ['python', 't.py']
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, TextIO, Union

from deviate_cb.errors import UsageError
from deviate_cb.launch.spec import ReplicationSpec
from deviate_cb.store.configuration import configuration_differences, configuration_of, describe_value
from deviate_cb.store.manifest import RunManifest

__all__ = ["agreed_configuration", "command_text", "confirm_relaunch", "program", "recorded_disagreements"]

_LAUNCHER = "deviate-replicate"
_VALUED = ("-W", "-X")  # an interpreter's options that take the next word as their value


def agreed_configuration(manifests: Sequence[tuple[Path, RunManifest]], label: str) -> dict[str, Any]:
    """The configuration every manifest of ``manifests`` (``(run.json path, the manifest read)``) records and agrees
    with.

    Raises:
        UsageError: A manifest records no configuration, one disagrees with its own fields or argv, or two record
            different configurations: one line naming the files and what differs.

    Example:
        >>> config = {"mode": "trainer", "trainer": "fns.py:base", "variant": "algo"}
        >>> read = RunManifest.from_json({"mode": "trainer", "trainer": "fns.py:base", "configuration": config})
        >>> agreed_configuration([(Path("r0/run.json"), read)], "experiment=a variant=algo")["trainer"]
        'fns.py:base'
    """
    problems: list[str] = []
    first: Optional[tuple[Path, dict[str, Any]]] = None
    for path, manifest in manifests:
        configuration = configuration_of(manifest)
        if configuration is None or "mode" not in configuration:
            raise UsageError(
                f"{label} cannot be relaunched as it was: {path} records no configuration (a study made before "
                "deviate-cb recorded it, or not by deviate-replicate). Replicate it again under a new --experiment, "
                "then compare with that."
            )
        problems.extend(f"{path}: {what}" for what in recorded_disagreements(manifest))
        if first is None:
            first = (path, configuration)
            continue
        differences = configuration_differences(first[1], configuration)
        if differences:
            problems.append(f"{first[0]} vs {path}: {'; '.join(differences)}")
    if problems:
        raise UsageError(
            f"`--against` must name a group whose run.json files agree on how it was launched (a manifest is not a "
            f"command: it is relaunched only from what they all record). Received: {label}, where "
            f"{'; '.join(problems)}."
        )
    if first is None:
        raise UsageError(f"`--against` must name a group with a completed run. Received: {label}, which has none.")
    return first[1]


def recorded_disagreements(manifest: RunManifest) -> list[str]:
    """Where a manifest's ``configuration`` disagrees with its own top-level fields or its ``argv``: one phrase each.

    ``argv`` is compared only when it is a ``deviate-replicate`` command line (the Python API records the caller's).

    Example:
        >>> recorded_disagreements(RunManifest.from_json({"mode": "trainer", "trainer": "f.py:g", "argv": [
        ...     "deviate-replicate", "--trainer=f.py:g", "--", "0.1"], "trainer_args": ["0.1"],
        ...     "configuration": {"mode": "trainer", "trainer": "f.py:g", "trainer_args": ["0.1"]}}))
        []
    """
    configuration = configuration_of(manifest)
    if configuration is None:
        return []
    said = _launched(configuration)
    found = []
    for source, other in (("its own", _launched(_own_fields(manifest))), ("its argv's", _argv_launch(manifest.argv))):
        if other is None:
            continue
        for key in dict.fromkeys([*said, *other]):
            if said.get(key) != other.get(key):
                found.append(
                    f"its configuration's {key} {describe_value(said.get(key))} vs {source} "
                    f"{describe_value(other.get(key))}"
                )
    return found


def program(trainer: Optional[str], command: Sequence[str] = ()) -> tuple[str, ...]:
    """What a launch runs, apart from its arguments: the trainer file or module, or the command's program."""
    if trainer:
        target = str(trainer).partition(":")[0]
        return ("python", target) if target.endswith(".py") else ("python", "-m", target)
    words = [str(word) for word in command]
    if not words:
        return ("command",)
    python = os.path.basename(words[0]).startswith("python")  # python, python3, python3.11: one interpreter
    found = ["python"] if python else ["command", words[0]]
    rest = iter(words[1:])
    for word in rest:
        if word in ("-m", "-c"):
            found += [word, next(rest, "")]
            break
        if word in _VALUED:
            next(rest, None)
        elif not word.startswith("-"):
            found.append(word)
            break
    return tuple(found)


def command_text(spec: ReplicationSpec) -> str:
    """The command line a relaunch of ``spec`` runs, as a user would type it.

    Example:
        >>> command_text(ReplicationSpec(trainer="fns.py:base", trainer_args=("0.1",)))
        'deviate-replicate --trainer fns.py:base -- 0.1'
        >>> command_text(ReplicationSpec(command=["touch", "/tmp/x y"]))
        "deviate-replicate -- touch '/tmp/x y'"
    """
    if spec.trainer:
        args = list(spec.trainer_args)
        return shlex.join([_LAUNCHER, "--trainer", str(spec.trainer)] + (["--", *args] if args else []))
    return shlex.join([_LAUNCHER, "--", *[str(word) for word in spec.command or ()]])


def confirm_relaunch(
    b_spec: ReplicationSpec,
    spec: ReplicationSpec,
    label: str,
    *,
    launch_dir: Union[str, Path, None],
    yes: bool,
    stdin: TextIO,
    stderr: TextIO,
) -> None:
    """Let group B (``b_spec``, launched from ``launch_dir``) run only if it runs this launcher's program
    (``spec``) from here, or the user agrees.

    Raises:
        UsageError: B runs another program (or from another directory), without ``yes`` and without a ``y`` at the
            prompt (no prompt when ``stdin`` is not a terminal).
    """
    here = os.path.realpath(os.getcwd())
    there = os.path.realpath(str(launch_dir or here))
    a_program = program(spec.trainer, spec.command or ())
    b_program = program(b_spec.trainer, b_spec.command or ())
    if a_program == b_program and here == there:
        return
    shown = f"{command_text(b_spec)} (in {there})"
    why = "another program" if a_program != b_program else "another directory"
    stderr.write(f"{_LAUNCHER}: {label} (group B) was launched with {why} than this launcher: it would run {shown}\n")
    stderr.flush()
    if yes:
        return
    if stdin.isatty():
        stderr.write(f"{_LAUNCHER}: run it? [y/N] ")
        stderr.flush()
        if stdin.readline().strip().lower() in ("y", "yes"):
            return
        raise UsageError(f"`--yes` was not given and the relaunch of {label} was not confirmed. Received: {shown}.")
    raise UsageError(
        f"`--yes` is required to relaunch {label} with {why} than this launcher's: check the command and add --yes. "
        f"Received: {shown}, no --yes and no terminal to ask."
    )


def _own_fields(manifest: RunManifest) -> dict[str, Any]:
    """The top-level fields of ``manifest`` that say what it launched (as :func:`_launched` reads them)."""
    return {
        "mode": manifest.mode,
        "trainer": manifest.trainer,
        "trainer_args": manifest.trainer_args,
        "command": manifest.command,
    }


def _launched(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that say what a launch runs: mode, then trainer and its arguments, or the command."""
    mode = fields.get("mode")
    if mode == "trainer":
        return {"mode": mode, "trainer": fields.get("trainer"), "trainer_args": list(fields.get("trainer_args") or [])}
    return {"mode": mode, "command": list(fields.get("command") or [])}


def _argv_launch(argv: Any) -> Optional[dict[str, Any]]:
    """What a ``deviate-replicate`` command line launches; ``None`` for another command line."""
    if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv):
        return None
    if os.path.basename(argv[0]) != _LAUNCHER:
        return None
    words = argv[1:]
    options, after = (words[: words.index("--")], words[words.index("--") + 1 :]) if "--" in words else (words, [])
    trainer = None
    for i, word in enumerate(options):
        name, equals, value = word.partition("=")
        if len(name) >= 4 and "--trainer".startswith(name):  # argparse takes an unambiguous prefix too
            trainer = value if equals else (options[i + 1] if i + 1 < len(options) else None)
    if trainer is None:
        return {"mode": "command", "command": after}
    return {"mode": "trainer", "trainer": trainer, "trainer_args": after}
