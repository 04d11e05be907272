"""Train with LLM Foundry: `composer scripts/train/train.py CONFIG.yaml [key=value overrides]`."""

import sys

from llmfoundry.command_utils import train_from_yaml

if __name__ == "__main__":
    train_from_yaml(sys.argv[1], sys.argv[2:])
