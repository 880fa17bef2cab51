"""The SDK side: `Elastic` (flytekit's config) and torchrun argv <-> task.

Private: the public API is ``elastic_idl``'s ``__all__``. Imports nothing.
"""
