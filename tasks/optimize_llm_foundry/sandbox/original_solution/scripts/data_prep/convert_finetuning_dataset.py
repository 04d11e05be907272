"""Tokenise a fine-tuning dataset (prompt/response rows) into a streaming (MDS) dataset with LLM Foundry."""

import argparse

from llmfoundry.command_utils import convert_finetuning_dataset_from_args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True, help="`json` for JSONL files, else a Hugging Face dataset name")
    parser.add_argument("--data_subset", default=None)
    parser.add_argument("--splits", default="train,validation", help="comma-separated")
    parser.add_argument("--preprocessor", default=None)
    parser.add_argument("--data_files", default="", help="one per split, comma-separated")
    parser.add_argument("--skip-preprocessing", action="store_true")
    parser.add_argument("--out_root", required=True)
    parser.add_argument("--local", default=None)
    parser.add_argument("--compression", default=None)
    parser.add_argument("--num_workers", type=int, default=None)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--tokenizer_kwargs", default=None, help="JSON")
    parser.add_argument("--max_seq_len", type=int, default=2048)
    parser.add_argument("--target_prompts", default="none")
    parser.add_argument("--target_responses", default="last")
    parser.add_argument("--encoder_decoder", action="store_true")
    args = parser.parse_args()
    convert_finetuning_dataset_from_args(
        dataset=args.dataset,
        data_subset=args.data_subset,
        splits=args.splits.split(","),
        preprocessor=args.preprocessor,
        data_files=args.data_files.split(",") if args.data_files else [],
        skip_preprocessing=args.skip_preprocessing,
        out_root=args.out_root,
        local=args.local,
        compression=args.compression,
        num_workers=args.num_workers,
        tokenizer=args.tokenizer,
        tokenizer_kwargs=args.tokenizer_kwargs,
        max_seq_len=args.max_seq_len,
        target_prompts=args.target_prompts,
        target_responses=args.target_responses,
        encoder_decoder=args.encoder_decoder,
    )


if __name__ == "__main__":
    main()
