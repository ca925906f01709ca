"""A torch.export program with three inputs: numbers, and two categorical ids through embeddings."""
