"""Starting solution: a plain PyTorch implementation of the conditional prefix sum.

y[i] = sum over j <= i of x[j] * p[j], where p[j] = 1 when the number of positive values
among x[0..j-1] (strictly before j) is odd, and 0 otherwise.
"""

import torch


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    positive = (x > 0).to(torch.int32)
    # Number of positives strictly before each position: inclusive count minus the element itself.
    count_before = torch.cumsum(positive, dim=0) - positive
    parity = count_before % 2
    return torch.cumsum(x * parity, dim=0).to(torch.int32)
