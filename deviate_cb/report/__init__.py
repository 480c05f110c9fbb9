"""The variance report of a study directory: what ``deviate report DIR`` prints, and :func:`load`, which gives the
same answers, tables and figures in Python and notebooks.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, loss in enumerate([0.30, 0.34]):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchEnd(status="completed"))
    ...     _ = run.metrics().append({"step": [0], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                               "name": ["val_loss"], "value": [loss], "wall_time": [0.0]})
    >>> print(render(build_report(root), "csv").splitlines()[0])
    experiment,variant,metric,aggregate,n,mean,std,cv,min,max,range,std_ci_low,std_ci_high,n_nonfinite
"""

from deviate_cb.report.answers.summary import COLUMNS, Report, ReportRow, build_report
from deviate_cb.report.reading.runs import RunRecord, find_runs
from deviate_cb.report.rendering.formats import FORMATS, print_table, render
from deviate_cb.report.study import Study, load

__all__ = [
    "COLUMNS",
    "FORMATS",
    "Report",
    "ReportRow",
    "RunRecord",
    "Study",
    "build_report",
    "find_runs",
    "load",
    "print_table",
    "render",
]
