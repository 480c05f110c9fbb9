"""The audit's recording, inside each replica: bit-exact digests of the first training steps.

- :mod:`~deviate_cb.audit.recording.digest`: the digest's definition and its NumPy reference.
- :mod:`~deviate_cb.audit.recording.torch_digest`: the same digest computed by torch on the tensor's device.
- :mod:`~deviate_cb.audit.recording.log`: the framework-free record of a step's digests.
- :mod:`~deviate_cb.audit.recording.hooks`: forward and gradient hooks on a torch model.
- :mod:`~deviate_cb.audit.recording.settings`: the callbacks' ``audit=`` argument and the record's writing.

``audit.parquet`` is :mod:`deviate_cb.store.audit`; the comparison of replicas is :mod:`deviate_cb.audit.divergence`.
"""
