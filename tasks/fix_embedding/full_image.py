"""fix_embedding's full image, for the build rehearsal (`rebench images rehearse fix_embedding`,
rebench_inspect/tools/rehearsal.py): preparation downloads OpenWebText and GPT-2 (the XL model
and the small one) and converts the models.
"""

from rebench_inspect import HubRepo, openwebtext, tiny_gpt2

from .sandbox.prepare import SETTINGS


def hub_repos() -> list[HubRepo]:
    full = SETTINGS["full"]
    return [openwebtext(), tiny_gpt2(str(full["large_model"]), seed=1), tiny_gpt2(str(full["small_model"]), seed=2)]
