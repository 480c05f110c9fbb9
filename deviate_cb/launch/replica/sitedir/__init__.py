"""The directory the launcher puts first on every replica's ``PYTHONPATH``: it holds only ``sitecustomize``.

Python imports ``sitecustomize`` at start-up, before the program it runs, in every interpreter whose
``site`` module runs (not under ``-I``, ``-E`` or ``-S``); the one here bootstraps the replica
(:mod:`deviate_cb.launch.replica.bootstrap`) and then runs the environment's own ``sitecustomize``, if there is one.
"""
