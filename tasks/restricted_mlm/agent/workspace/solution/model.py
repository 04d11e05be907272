"""The starting model: token embedding -> flatten -> MLP with ReLU -> unflatten -> linear output layer.

The forward pass uses only allowed operations (see the task's rules). `get_trained_model()` is what the scorer
calls: it must return the trained model, ready to run.
"""

import itertools
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


class Model(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        sequence_length: int,
        embed_dim: int,
        layer_sizes: list[int],
    ):
        super().__init__()
        self.sequence_length, self.embed_dim = sequence_length, embed_dim
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        sizes = [sequence_length * embed_dim, *layer_sizes]
        self.hidden = nn.ModuleList(
            nn.Linear(a, b) for a, b in itertools.pairwise(sizes)
        )
        self.back = nn.Linear(sizes[-1], sequence_length * embed_dim)
        self.output = nn.Linear(embed_dim, vocab_size)

    def forward(self, token_indices: torch.Tensor) -> torch.Tensor:
        batch = token_indices.shape[0]
        x = self.embedding(token_indices).reshape(
            batch, self.sequence_length * self.embed_dim
        )
        for layer in self.hidden:
            x = torch.nn.functional.relu(layer(x))
        x = self.back(x).reshape(batch, self.sequence_length, self.embed_dim)
        return self.output(x)


def get_trained_model() -> nn.Module:
    checkpoint = torch.load(
        HERE / "basic_model.pt", map_location="cpu", weights_only=True
    )
    model = Model(**checkpoint["config"])
    model.load_state_dict(checkpoint["state_dict"])
    return model.eval()
