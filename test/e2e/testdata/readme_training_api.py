# The names README.md's training API snippet leaves to the reader, kept small: a linear
# model on random data, a few steps an epoch. readme_test.go puts the snippet after this.
import os

import torch


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def train_one_epoch(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


epochs = int(os.environ["README_EPOCHS"])
_data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
loader = torch.utils.data.DataLoader(_data, batch_size=16, shuffle=True)
