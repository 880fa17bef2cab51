"""The launcher: the launch spec, the launcher, the torch agent (the one module that imports
torch), the worker bootstrap, the fork server and the failure records.

Private: the public API is ``elastic_idl``'s ``__all__``. Imports nothing, so nothing here
loads torch until a launch needs it.
"""
