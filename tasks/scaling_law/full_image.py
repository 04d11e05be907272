"""scaling_law's full image, for the build rehearsal (`rebench images rehearse scaling_law`,
rebench_inspect/tools/rehearsal.py): preparation downloads OpenWebText (its Parquet shards) and tokenises it.
"""

from rebench_inspect import HubRepo, openwebtext


def hub_repos() -> list[HubRepo]:
    return [openwebtext()]
