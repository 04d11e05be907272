"""Test support shipped with the host package: the pytest plugin (plugin.py), the shared fixtures (fixtures.py), a
scripted agent (scripted.py)."""
