"""Anchors: the raw values of the starting and reference solutions at one scale, and the anchors files of
`rebench calibrate` that replace an environment's built-in ones for a run (`-T anchors=FILE`)."""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .scales import Scale

ANCHORS_FILE_KIND = "rebench-anchors"


class Anchors(BaseModel):
    """Raw values of the starting and reference solutions at one scale, and where they come from."""

    model_config = ConfigDict(frozen=True)

    start: float
    reference: float
    provenance: str = Field(description="e.g. 'paper, H100' or 're-measured on <hardware> on <date>'")


def load_anchors(path: str | Path, environment_name: str, scale: Scale, built_in: Anchors) -> Anchors:
    """The anchors an anchors file gives `environment_name` at `scale` (`built_in` where the file only checked them);
    refuses a file made for another environment or scale."""
    path = Path(path)
    document = json.loads(path.read_text())
    if document.get("kind") != ANCHORS_FILE_KIND:
        raise ValueError(f"{path} is not a rebench anchors file (made by `rebench calibrate`)")
    if "replaces_built_in_anchors" not in document:
        raise ValueError(f"{path} was written by an older `rebench calibrate`: run the calibration again")
    if (document["environment"], document["scale"]) != (environment_name, scale):
        raise ValueError(
            f"{path} holds anchors for {document['environment']} at {document['scale']} scale, "
            f"not {environment_name} at {scale} scale"
        )
    if not document["replaces_built_in_anchors"]:
        return built_in
    gpus = ", ".join(str(gpu) for gpu in document["hardware"].get("gpu", [])) or "no GPU"
    return Anchors(
        start=float(document["anchors"]["start"]),
        reference=float(document["anchors"]["reference"]),
        provenance=f"calibration file {path.resolve()} ({document['date']}; {gpus})",
    )
