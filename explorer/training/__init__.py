"""Training and measuring: the trainer, recipes, background jobs, evaluation and comparisons."""
