"""What developers and operators run around tasks: reports, calibration, image builds, the prepared-asset cache.
Imports `spec` and `runtime`; no core module imports a tool (tests/contract/test_layers.py)."""
