"""The audit: bit-exact digests of the first training steps, to find where identical runs stop being identical.

- :mod:`~deviate_cb.capture.audit.digest`: the digest's definition and its NumPy reference.
- :mod:`~deviate_cb.capture.audit.torch_digest`: the same digest computed by torch on the tensor's device.
- :mod:`~deviate_cb.capture.audit.log`: the framework-free record of a step's digests.
- :mod:`~deviate_cb.capture.audit.hooks`: forward and gradient hooks on a torch model.
- :mod:`~deviate_cb.capture.audit.settings`: the callbacks' ``audit=`` argument and the record's writing.

``audit.parquet`` is :mod:`deviate_cb.store.audit`; the comparison of replicas is :mod:`deviate_cb.audit.divergence`.
"""
