"""Attention Explorer: an RNN encoder-decoder with Query/Key/Value attention, traced step by step."""

__version__ = "0.1.0"
