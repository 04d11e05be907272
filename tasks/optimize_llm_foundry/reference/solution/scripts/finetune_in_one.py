"""Tokenise, train and save in one process per rank:
`composer finetune_in_one.py CONFIG.yaml DATA.jsonl OUTPUT_DIR [key=value overrides]`.

Does what the original three steps do, with the same configuration, precision, sharding and hyper-parameters:
rank 0 tokenises with a single worker while the others wait; training skips the evaluation split and the Composer
checkpoint; the trained weights are gathered from memory and saved in bfloat16, as the original conversion does.
"""

import sys

import torch
from composer.utils import dist
from llmfoundry.command_utils import convert_finetuning_dataset_from_args, train
from omegaconf import OmegaConf as om
from torch.distributed.fsdp import FullyShardedDataParallel


def main() -> None:
    config_path, data_file, output_dir, *overrides = sys.argv[1:]
    with open(config_path) as f:
        config = om.merge(om.load(f), om.from_cli(overrides))
    data_local = config.variables.data_local

    dist.initialize_dist(dist.get_device(None) if hasattr(dist, "get_device") else None)
    if dist.get_global_rank() == 0:
        convert_finetuning_dataset_from_args(
            dataset="json",
            data_subset=None,
            splits=["train"],
            preprocessor=None,
            data_files=[data_file],
            skip_preprocessing=True,
            out_root=data_local,
            local=None,
            compression=None,
            num_workers=1,
            tokenizer=config.variables.model_name_or_path,
            tokenizer_kwargs=None,
            max_seq_len=4096,
            target_prompts="none",
            target_responses="last",
            encoder_decoder=False,
        )
    dist.barrier()

    config.train_loader.dataset.streams.my_data.split = "train"
    config.train_loader.num_workers = 1
    config.eval_interval = 0
    for unused in ("eval_loader", "save_folder", "save_interval", "save_num_checkpoints_to_keep"):
        config.pop(unused, None)
    if torch.cuda.is_available():
        config.model.use_flash_attention_2 = True
    trainer = train(config)

    model = trainer.state.model.model
    if isinstance(model, FullyShardedDataParallel) or any(
        isinstance(module, FullyShardedDataParallel) for module in model.modules()
    ):
        with FullyShardedDataParallel.summon_full_params(model, writeback=False, rank0_only=True):
            if dist.get_global_rank() == 0:
                save(model, output_dir, config.variables.model_name_or_path)
    elif dist.get_global_rank() == 0:
        save(model, output_dir, config.variables.model_name_or_path)
    dist.barrier()


def save(model: torch.nn.Module, output_dir: str, base_model: str) -> None:
    from transformers import AutoTokenizer

    state = {name: tensor.detach().to(torch.bfloat16) for name, tensor in model.state_dict().items()}
    model.save_pretrained(output_dir, state_dict=state)
    AutoTokenizer.from_pretrained(base_model).save_pretrained(output_dir)


if __name__ == "__main__":
    main()
