"""The audit wing: ``deviate audit``'s logic, from running the recorded replicas to the exit status, and the
comparisons of their records (replicas, ranks, a kept reference, a resumed run, two machines).

The recording inside each replica is :mod:`deviate_cb.capture.audit`; ``audit.parquet`` is
:mod:`deviate_cb.store.audit`.
"""
