"""The group ``--until-decided --against`` names, and how to relaunch it exactly as its run.json files record it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.relaunch_check import agreed_configuration
from deviate_cb.launch.sequence_lines import finite, group_label
from deviate_cb.launch.spec import ReplicationSpec
from deviate_cb.store.run_directory import read_run_manifest, run_path

__all__ = ["against_spec"]


def against_spec(
    out: Path, against: Sequence[str], metric: str, *, exclude: tuple[str, str], spec: ReplicationSpec
) -> tuple[ReplicationSpec, tuple[str, str], int, Optional[str]]:
    """How to relaunch the group ``against`` names exactly as its manifests record it.

    Returns:
        ``(its spec, (experiment, variant), completed runs, launch directory)``: the spec keeps ``spec``'s output
        directory, parallelism, timeout, GPUs, backend and ``--cold``; the directory its launcher ran in (``None``
        when not recorded) is where the caller runs it from.

    Raises:
        UsageError: No such group, several, the group itself, no completed run with ``metric``, or a group whose
            replicas record no configuration or several.

    Example:
        >>> against_spec(Path("/nonexistent"), ["experiment=a"], "acc", exclude=("b", "algo"), spec=ReplicationSpec())
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `--against` names no group: /nonexistent holds no run yet (...).
    """
    from deviate_cb.report.reading.selection import parse_term, select, store_runs

    terms = [parse_term(text, "--against") for text in against]
    try:
        runs = store_runs(str(out), metrics=None, warnings=[])
    except UsageError as exc:
        raise UsageError(f"`--against` names no group: {out} holds no run yet ({exc}).") from None
    chosen = select(runs, terms, "--against")
    groups = sorted({(r.keys["experiment"], r.keys["variant"]) for r in chosen})
    if len(groups) != 1:
        named = ", ".join(group_label(g) for g in groups)
        raise UsageError(
            f"`--against` must name one group (add experiment=... and variant=...). Received: "
            f"--against={' '.join(against)}, which matches {named}."
        )
    b_group = groups[0]
    if b_group == exclude:
        raise UsageError(
            f"`--against` names the group being replicated itself. Received: --against={' '.join(against)}."
        )
    with_metric = [r for r in chosen if finite(r.values.get(metric))]
    if not with_metric:
        names = sorted({m for r in chosen for m in r.values})
        raise UsageError(
            f"`--metric` {metric!r} is not a metric of {group_label(b_group)}, the group --against names. Received: "
            f"--metric {metric}. Its metrics: {', '.join(names) or 'none'}."
        )
    manifests, launch_dirs = [], set()
    for run in chosen:
        file = run_path(out, b_group[0], b_group[1], int(run.keys["replica"])) / "run.json"
        manifest = read_run_manifest(str(file))
        manifests.append((file, manifest))
        if manifest.launch_dir is not None:
            launch_dirs.add(manifest.launch_dir)
    config = agreed_configuration(manifests, group_label(b_group))  # every replica, its fields and its argv agree
    if len(launch_dirs) > 1:
        raise UsageError(
            f"{group_label(b_group)} cannot be relaunched as it was: its replicas record different launch directories."
        )
    b_spec = ReplicationSpec.from_manifest(config, experiment=b_group[0], variant=b_group[1], base=spec)
    argv = manifests[0][1].argv
    if argv is not None:  # B's replicas record B's command line, which their check reads, not A's
        b_spec = b_spec.with_changes(argv=argv)
    directory = None
    if launch_dirs:
        (directory,) = launch_dirs
        if not os.path.isdir(directory):
            raise UsageError(
                f"{group_label(b_group)} cannot be relaunched as it was: it was launched from {directory}, which does "
                "not exist here."
            )
    return b_spec, b_group, len(with_metric), directory
