"""What runs for a task: the task builder, setup, scoring and its staging, the sandbox specs and layout, the per-sample
state, the agent and its tools, the model proxy and smoke models. Imports `spec`, never `tools` or the CLI
(tests/contract/test_layers.py)."""
