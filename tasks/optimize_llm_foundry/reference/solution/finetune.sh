#!/bin/bash
# Reference solution: the same fine-tuning in one launch of one program (scripts/finetune_in_one.py), which tokenises
# with one worker, trains without evaluation data or a Composer checkpoint, and saves the Hugging Face weights
# straight from memory.
set -euo pipefail

cd "$(dirname "$0")"
source ../env.sh

rm -rf finetuning_tokens ftout trained_model
composer scripts/finetune_in_one.py finetune.yaml ../train_data.jsonl trained_model \
    variables.data_local=finetuning_tokens \
    variables.model_name_or_path="${BASE_MODEL}"
