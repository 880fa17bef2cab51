"""The task: the messages, the shared names and enum tables, the task view, decode/encode, the rules.

Private: the public API is ``elastic_idl``'s ``__all__``. Imports nothing, so importing a
``_pb2`` module or ``elastic_idl`` itself stays lazy.
"""
