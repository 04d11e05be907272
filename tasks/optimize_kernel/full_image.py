"""optimize_kernel's full image, for the build rehearsal (`rebench images rehearse optimize_kernel`,
rebench_inspect/tools/rehearsal.py): no downloads; its torch replaces the base's, and fidelity.md states the versions.
"""

# docs/fidelity.md, optimize_kernel's software row (also pinned in sandboxes/optimize_kernel/requirements.txt).
FIDELITY_PINS = {"/opt/venv": {"torch": "2.3.1", "triton": "2.3.1", "numpy": "1.26.4"}}
# The torch releases in the image (its own replaces the base's): what `rebench preflight` needs of the driver.
IMAGE_TORCH = ("2.3.1",)
