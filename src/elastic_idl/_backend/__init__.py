"""The backend side: the PyTorchJob renderer and the operator's pod env.

Private: the public API is ``elastic_idl``'s ``__all__``. Imports nothing.
"""
