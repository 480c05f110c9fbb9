"""A replica that records a metric, then sleeps until it is stopped (or ``SLEEPER_SECONDS`` pass), then records
another: a replica that outlives its launcher would add that second value to whatever attempt is there."""

import os
import sys
import time

from deviate_cb.context import RunContext
from deviate_cb.launch.replica.final_metrics import record_final_metrics

ctx = RunContext.current()
assert ctx is not None, "run me under deviate-replicate"
record_final_metrics({"started": 1.0}, ctx.run_dir)
print(f"sleeping pid={os.getpid()}", flush=True)
deadline = time.monotonic() + float(os.environ.get("SLEEPER_SECONDS", "60"))
while time.monotonic() < deadline:
    time.sleep(0.1)
record_final_metrics({"finished": 1.0}, ctx.run_dir)
sys.exit(0)
