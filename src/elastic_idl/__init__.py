"""elastic-idl (placeholder while packaging is tried)."""
