"""Interop tests against implementations we did not write (the official ACP Python SDK)."""
