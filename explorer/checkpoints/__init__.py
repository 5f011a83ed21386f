"""Models on disk: the checkpoint format, its header checks and the registry of loaded models."""
