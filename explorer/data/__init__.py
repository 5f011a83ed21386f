"""Text in, ids out: the toy tasks, corpora, subword tokenizers and vocabularies (torch-free)."""
