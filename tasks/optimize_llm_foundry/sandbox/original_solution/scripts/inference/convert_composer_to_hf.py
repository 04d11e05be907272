"""Convert a Composer checkpoint of an `hf_causal_lm` model into a Hugging Face model folder (weights, config and
tokenizer), in the requested precision."""

import argparse
import os

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--composer_path", required=True)
    parser.add_argument("--hf_output_path", required=True)
    parser.add_argument("--output_precision", choices=sorted(PRECISIONS), default="fp32")
    parser.add_argument("--base_model", default=os.environ.get("BASE_MODEL"), help="default: $BASE_MODEL")
    args = parser.parse_args()

    checkpoint = torch.load(args.composer_path, map_location="cpu")
    # Composer keeps the wrapped Hugging Face model under the attribute `model`.
    weights = {
        name.removeprefix("model."): tensor
        for name, tensor in checkpoint["state"]["model"].items()
        if name.startswith("model.")
    }
    config = AutoConfig.from_pretrained(args.base_model)
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(weights)
    model.to(PRECISIONS[args.output_precision]).save_pretrained(args.hf_output_path)
    AutoTokenizer.from_pretrained(args.base_model).save_pretrained(args.hf_output_path)


if __name__ == "__main__":
    main()
