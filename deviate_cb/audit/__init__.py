"""The audit wing: the recording inside each replica (:mod:`deviate_cb.audit.recording`, beside capture in the
layering), the comparisons of the records (replicas, ranks, a kept reference, a resumed run, two machines) and
``deviate audit``'s logic, from running the recorded replicas to the exit status.

``audit.parquet`` is :mod:`deviate_cb.store.audit`.
"""
